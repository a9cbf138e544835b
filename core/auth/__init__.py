"""Authentication: the SCRAM server exchange and its crypto, the SCRAM login backend over a
store's image (login), and delegation-token HMACs."""
