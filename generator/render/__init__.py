"""The render pipeline: options, the cookiecutter render, the layout, pristine copies."""
