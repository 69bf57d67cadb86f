"""memctl: the command line of memstore."""
