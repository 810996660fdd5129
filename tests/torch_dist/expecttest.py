"""expecttest.py - a stand-in for the `expecttest` package (not in Debian), enough for
torch.testing._internal.common_utils to import: the distributed test base never compares
expect files."""
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    pass
