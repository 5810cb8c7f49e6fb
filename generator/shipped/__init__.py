"""Code generated projects carry in scripts/ (module_source copies it): stdlib only, Python 3.8."""
