"""The grid's own local Dask cluster (experiments/grid.py's "dask" executor without --scheduler), closed to everyone
but the process that starts it: its scheduler, nannies and workers speak only TLS on 127.0.0.1, with a certificate
made for this cluster alone and held in memory (Dask's Security.temporary), so that a connection without it is
refused (another user of the machine could otherwise connect and run code in the workers as the grid's user); and
none of them starts an HTTP server (Dask starts one in the scheduler and in every worker even without a dashboard,
which answers any Host with the cluster's identity, logs and metrics). The grid needs none of it.

Imported only by the dask executor, since it needs distributed (and cryptography, for the certificate).

    >>> Scheduler.start_http_server is Worker.start_http_server is no_http_server
    True
"""

import logging

import distributed

# ----------------------------------------------------------------------------------------------------------------
# No HTTP server


def no_http_server(node, routes, dashboard_address, default_port=0, ssl_options=None):
    """What the scheduler and the workers below do instead of Dask's Node.start_http_server: nothing listens (the
    routes, health checks, logs, metrics and a dashboard's pages, are never served); node.services stays without
    "dashboard", so that Dask knows there is none."""


class Scheduler(distributed.Scheduler):
    """Dask's scheduler, without its HTTP server (a subclass: Dask calls start_http_server as it starts it)."""

    start_http_server = no_http_server


class Worker(distributed.Worker):
    """Dask's worker, without its HTTP server; each nanny starts it in a process of its own, by this name."""

    start_http_server = no_http_server


# ----------------------------------------------------------------------------------------------------------------
# The cluster


def local_cluster(workers):
    """A distributed.SpecCluster of a Scheduler and `workers` nannies on 127.0.0.1, each running one Worker of one
    thread in a process of its own, all over TLS with one temporary certificate (tls://), only errors logged; with
    it, the Security a client of it needs: distributed.Client(cluster, security=security)."""
    security = distributed.Security.temporary()  # (a key and certificate made now, in memory, for this cluster only)
    where = {"host": "127.0.0.1", "protocol": "tls://", "security": security}
    scheduler = {"cls": Scheduler, "options": {**where, "dashboard": False, "dashboard_address": None}}
    worker = {"cls": distributed.Nanny, "options": {**where, "nthreads": 1, "worker_class": Worker,
                                                    "dashboard": False, "silence_logs": logging.ERROR}}
    cluster = distributed.SpecCluster(scheduler=scheduler, workers={k: worker for k in range(workers)},
                                      security=security, silence_logs=logging.ERROR)
    return cluster, security
