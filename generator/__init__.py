"""train-template: generate training projects for OpenI, ModelArts/Ascend and CUDA clusters.

Kept import-free on purpose: the template's hooks and Jinja extension import
submodules of this package (``generator.render.options``, ``generator.shipped.ranktable``)
with nothing but cookiecutter installed.
"""

__version__ = "0.1.0"
