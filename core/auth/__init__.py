"""Authentication: the SCRAM server exchange and its crypto, and delegation-token HMACs."""
