"""{{ cookiecutter.project }}: LeNet on MNIST-format data for CPU, CUDA and Ascend."""
