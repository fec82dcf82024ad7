"""The one place the version is written: setup.cfg reads it (`attr:`), the package and Settings import it."""

__version__ = "0.1.0"
