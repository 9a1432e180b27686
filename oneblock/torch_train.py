"""The PyTorch backend of training.py (train.py --backend torch): the twin of torch_model.py trained by the same loop,
on one device or data-parallel under torchrun; docs/torch.md, "The torch backend", says how to run it and how the
ranks share a batch. training.py keeps the loop, and train.py the checkpoints; this file adds what PyTorch needs:

- The twin as a `torch.nn.Module` (`Twin`), because `DistributedDataParallel` wraps a module: its forward is
  torch_model.forward and the loss. train.py's weights stay a dict of plain tensors; each step copies them into the
  module's parameters, runs forward and backward, and hands back the gradients.
- Under torchrun (the environment variables RANK and WORLD_SIZE), one process per rank joins a process group (gloo
  on CPU, NCCL on CUDA), takes its own B / W of every step's windows, and averages its loss with the others'.

    >>> from oneblock.config import ModelConfig
    >>> from oneblock.settings import Settings, checked
    >>> s = checked(Settings(backend="torch", batch=2, seq_len=4, dtype="float64"))
    >>> init, loss_and_grads, loss = model_functions(s, ModelConfig(vocab=96, d=16, hidden=64, max_len=64))
    >>> params = init(3)
    >>> l, grads = loss_and_grads(params, [[1, 2, 3, 4], [5, 6, 7, 8]], [[2, 3, 4, 5], [6, 7, 8, 9]])
    >>> round(l, 4), tuple(grads["W1"].shape), grads["W1"].dtype
    (4.584, (16, 64), torch.float64)
"""

import datetime
import os

import numpy as np
import torch
import torch.distributed as dist

from oneblock import torch_model

TIMEOUT = datetime.timedelta(minutes=10)  # the longest a rank waits for the others (to join, in a collective)
ARRIVED, ALL_ARRIVED = "oneblock/arrived", "oneblock/all arrived"  # the store's keys of `together`

# ----------------------------------------------------------------------------------------------------------------
# Where this process runs: its rank among the processes torchrun started, and its device


def world():
    """(rank, world size) of this process: from torchrun's environment, (0, 1) outside it.

    >>> world() if "WORLD_SIZE" not in os.environ else (0, 1)
    (0, 1)
    """
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def device_problem(device):
    """Why --device cannot be used here, in one line; None if it can.

    >>> device_problem("cpu") is None
    True
    """
    if device == "cuda" and not torch.cuda.is_available():
        return (f"--device cuda: PyTorch {torch.__version__} sees no CUDA device here (torch.cuda.is_available() is"
                f" False); use --device cpu, or auto, which takes CUDA only when there is one")
    if device == "mps" and not torch.backends.mps.is_available():
        return "--device mps: PyTorch sees no Apple GPU (MPS) here; use --device cpu or auto"
    return None


def device_of(s):
    """The torch.device of this rank for --device (auto: CUDA when present, else the CPU; under torchrun with CUDA,
    the GPU of LOCAL_RANK)."""
    name = s.device if s.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device(name)


def describe(s):
    """One line: what this run computes with.

    >>> from types import SimpleNamespace
    >>> describe(SimpleNamespace(device="cpu", threads=1)).startswith("PyTorch ")
    True
    """
    rank, size = world()
    group = f", {size} processes ({dist.get_backend()})" if dist.is_initialized() else ", one process"
    return f"PyTorch {torch.__version__} on {device_of(s)}{group}, {s.threads} CPU thread(s) each"


def start(s):
    """Join torchrun's process group when there is more than one rank, and return the store the ranks met at
    (torchrun's key-value server, beside the group's connections) for `together`; None in one process."""
    rank, size = world()
    if size == 1 or dist.is_initialized():
        return None
    backend = "nccl" if device_of(s).type == "cuda" else "gloo"
    store, rank, size = next(dist.rendezvous("env://", timeout=TIMEOUT))
    dist.init_process_group(backend, store=store, rank=rank, world_size=size, timeout=TIMEOUT)
    return store


def together(store):
    """Wait until every rank has come this far: called once a run has ended well on every rank, before each leaves
    the process group, so that none tears its connections down while another still has a message on them. The ranks
    meet at the store, not through the group: a barrier of the group is itself a message that a rank done with it
    may leave before its peer has read it (a rank that left early was once seen to abort in gloo's teardown, under
    load), whereas a rank counts itself in at the store only once its own last message has arrived."""
    if store is None:
        return
    if store.add(ARRIVED, 1) == world()[1]:  # the last to arrive tells the others
        store.set(ALL_ARRIVED, "yes")
    store.wait([ALL_ARRIVED])


def finish():
    """Leave the process group, if this process joined one."""
    if dist.is_initialized():
        dist.destroy_process_group()


def share(value):
    """Rank 0's value, on every rank (a one-line message, or None): how rank 0 tells the others to stop or go on.

    >>> share("go")
    'go'
    """
    if not dist.is_initialized():
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


# ----------------------------------------------------------------------------------------------------------------
# The twin as a module, and the three functions train.py's loop calls


class Twin(torch.nn.Module):
    """The twin as the module DistributedDataParallel wraps, its forward the mean loss of a batch; a dot in a
    parameter's name, which modules do not allow, is written as a double underscore."""

    def __init__(self, params, config):
        super().__init__()
        self.names = list(params)
        self.weights = torch.nn.ParameterDict(
            {name.replace(".", "__"): torch.nn.Parameter(t.detach().clone()) for name, t in params.items()})
        self.config = config

    def tensors(self):
        """The parameters by the twin's names."""
        return {name: self.weights[name.replace(".", "__")] for name in self.names}

    def forward(self, ids, targets):
        logits, _ = torch_model.forward(self.tensors(), ids, self.config)  # (B, T, V)
        return torch_model.loss_fn(logits, targets)


def model_functions(s, config):
    """(init, loss_and_grads, loss) of the torch backend for s and the model's ModelConfig: the same interface as
    training.model_functions. Weights and gradients are dicts of tensors on this rank's device."""
    device, dtype = device_of(s), getattr(torch, s.dtype)  # (torch.float32 or torch.float64)
    rank, size = world()
    torch.set_num_threads(s.threads)
    twin = None  # made at the first step, from that step's weights (the ranks all start from the same ones)

    def tensor(x, kind=dtype):
        return torch.as_tensor(np.asarray(x), dtype=kind, device=device)

    def init(seed):
        # model.py's numbers for block 0 (float64, then this run's dtype) and the other blocks' after them
        return {name: tensor(t) for name, t in config.init_params(seed).items()}

    def loss_and_grads(params, ids, targets):
        nonlocal twin
        if twin is None:
            module = Twin(params, config).to(device)
            # pos_emb takes no part in the loss without learned positions, and DDP must be told a parameter may not
            twin = module if size == 1 else torch.nn.parallel.DistributedDataParallel(
                module, find_unused_parameters=config.positions != "learned")
        weights = (twin.module if size > 1 else twin).tensors()
        with torch.no_grad():
            for name, p in weights.items():
                p.copy_(params[name])
                p.grad = None
        loss = twin(tensor(ids, torch.int64), tensor(targets, torch.int64))  # this rank's B / W windows
        loss.backward()  # under DDP the gradients are averaged over the ranks here
        grads = {name: p.grad if p.grad is not None else torch.zeros_like(p) for name, p in weights.items()}
        mean = loss.detach()
        if size > 1:
            dist.all_reduce(mean)
            mean /= size
        return float(mean), grads

    def loss(params, ids, targets):
        with torch.no_grad():
            logits, _ = torch_model.forward(params, tensor(ids, torch.int64), config)  # (B, T, V)
            return float(torch_model.loss_fn(logits, tensor(targets, torch.int64)))

    return init, loss_and_grads, loss


def from_arrays(arrays, s):
    """A dict of NumPy arrays (a checkpoint's tensors) as tensors on this rank's device, bit for bit."""
    return {name: torch.as_tensor(a, device=device_of(s)) for name, a in arrays.items()}
