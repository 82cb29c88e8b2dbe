"""The ``mopa`` command line: argument parsing and printing live here."""
