"""The gen command line: main.py holds the group, each command its own module."""
