"""The commands of ``python -m context_neurons`` that take more than a few lines: each module
holds one command's options and the function that runs it, called by
:mod:`context_neurons.__main__` through its one error wrapper. Library modules are not entry
points (issue 51): they compute; a command checks its input, calls them and prints."""
