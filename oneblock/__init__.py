"""The library that every command, experiment and benchmark of this lab shares (model.py, the seed's reference,
and the other files of the seed's lab stay at the root, standard library only, as the seed ships them):

    config        ModelConfig: the one description of a model (sizes, blocks, heads, scheme), its names and costs
    numpy_model   the batched NumPy mirror of model.py, each layer as its formula; any blocks, heads and positions
    numpy_fast    the same maths tuned for a training loop: every array of a step in one Workspace
    torch_model   an independent PyTorch twin, for cross-checks and export
    torch_train   the twin on a device, and data-parallel ranks under torchrun
    settings      the settings of a training run, as plain values, checked in one place
    data          what a run reads: the stories or a text of your own, split, with its tokenizer and floors
    training      the step, the loop and train(settings): a model trained from plain values
    tensorfile    the safetensors container, written and read with the standard library
    checkpoint    training checkpoints in it: weights, Adam, the sampler's state and metadata, every field checked
    sampling      text from a trained model, one token at a time
    lessons       predict, then check: questions about the model, each answered live by model.py
    workbook      build it yourself: model.py with the build's functions blank, and its command line
    grade         the grader of a learner's model.py, step by step, the first wrong number placed
    mistakes      the catalogue of named mistakes the grader recognises, each a small change of model.py
    export        what the browser explorer reads, exported beside its page
    server        the explorer's web server: one folder's regular files, on 127.0.0.1 only
    floor         the entropy floor of the stories: the lowest loss any model can expect
    machine       what a script needs installed, the BLAS kernels and threads NumPy computes with, the memory left

Standard library only, but for numpy_model, numpy_fast, torch_model and torch_train, and what runs them.
"""
