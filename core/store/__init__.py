"""The store: the facade (SecurityStore), its published state, the store directory, read-only views."""
