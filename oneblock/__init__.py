"""The library that every command, experiment and benchmark of this lab shares (model.py, the seed's reference,
and the other files of the seed's lab stay at the root, standard library only, as the seed ships them):

    numpy_model   the batched NumPy mirror of model.py, each layer as its formula; any blocks, heads and positions
    numpy_fast    the same maths tuned for a training loop: every array of a step in one Workspace
    torch_model   an independent PyTorch twin, for cross-checks and export
    torch_train   the twin on a device, and data-parallel ranks under torchrun
    settings      the settings of a training run, as plain values, checked in one place
    sizes         the names and shapes blocks and heads give, and what a size costs in memory
    floor         the entropy floor of the stories: the lowest loss any model can expect
    machine       what a script needs installed, the BLAS kernels NumPy computes with, and the memory left
"""
