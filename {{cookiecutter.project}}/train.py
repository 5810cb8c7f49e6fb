"""Train the model of src/model.py on the data src/data.py reads: the boot file OpenI,
ModelArts and the launch scripts run.

On a CPU, a CUDA GPU or an Ascend NPU, alone or as one rank of many; see
README.md for the options and src/scaffold/runner.py for the order of a run.
"""

import sys

# The oldest Python the catalogue's images carry; a clear line beats a SyntaxError.
if sys.version_info < (3, 8):  # noqa: UP036 (the check itself)
    sys.stderr.write("error: train.py needs Python 3.8 or newer; this is ")
    sys.stderr.write(sys.version.split()[0] + "\n")
    sys.exit(2)
{%- if cookiecutter.framework == 'mindspore' %}

from src.scaffold.sigint import take_sigint  # noqa: E402

# Before numpy and MindSpore start threads: Ctrl-C must stay SIGINT (see sigint.py).
take_sigint()
{%- endif %}

from src.scaffold.runner import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
