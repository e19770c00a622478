"""Simulated flashinfer.autotuner.autotuner (seed B): the kernel autotuner and its config cache.

Cache keys are str((op, runner, profile, extras)), values [runner, tactic]; the MoE runner's
extras carry tp_rank/ep_rank, so a cached file serves only the ranks its keys name.
"""
import contextlib
import json
import os
import time

import torch
import torch.distributed as dist

import flashinfer

_RESERVED_KEYS = ("_metadata", "_generation", "_records")


def _log(msg):
    """FlashInfer's logger (one write(2) per line)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    os.write(1, f"{stamp} - INFO - flashinfer.jit: {msg}\n".encode())


class TunableRunner:
    """A kernel with several tactics (tile shapes, schedules) the autotuner can choose from."""

    def get_valid_tactics(self, inputs, profile):
        """The tactics valid for these inputs."""
        return [0]

    def cache_extras(self):
        """What else the cache key must hold for this runner (the MoE runner: tp/ep rank)."""
        return ()

    def forward(self, inputs, tactic=-1):
        """Runs the kernel with a tactic (-1: the default one)."""
        return inputs


class AutoTuner:
    """Chooses the fastest tactic per op and input profile, by profiling or from the cache."""

    _instance = None

    @classmethod
    def get(cls):
        """The process-wide autotuner."""
        if cls._instance is None:
            cls._instance = AutoTuner()
        return cls._instance

    def __init__(self):
        """An empty profiling cache, not in tuning mode, no tune process group yet."""
        self.profiling_cache = {}
        self.is_tuning_mode = False
        self.process_group = None
        self.warmup = 1

    @staticmethod
    def cache_key(custom_op, runner, profile):
        """The cache key: str((op, runner name, profile, runner extras))."""
        return str((custom_op, type(runner).__name__, tuple(profile), runner.cache_extras()))

    def load_configs(self, path, runner=None):
        """Loads cached (runner, tactic) choices from a config file; here only the entries valid
        for this rank (whose keys hold this runner's extras, e.g. its tp_rank)."""
        with open(path) as f:
            data = json.load(f)
        extras = str(runner.cache_extras()) if runner is not None else ""
        loaded = 0
        for key, value in data.items():
            if key in _RESERVED_KEYS or not key.endswith(extras + ")"):
                continue
            self.profiling_cache[key] = tuple(value)
            loaded += 1
        if loaded:
            _log(f"[Autotuner]: Loaded {loaded} configs from {path}")
        return loaded

    def save_configs(self, path):
        """Writes the profiling cache to a config file, with the environment in _metadata."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = {"_metadata": {"flashinfer_version": flashinfer.__version__, "cuda_version": "12.9",
                              "cublas_version": "12.9.1.4", "cudnn_version": "9.10.2",
                              "gpu": "NVIDIA H100 80GB HBM3"}}
        data.update({key: list(value) for key, value in self.profiling_cache.items()})
        with open(path, "w") as f:
            json.dump(data, f, indent=2)

    def choose_one(self, custom_op, runners, tuning_config, inputs, **kwargs):
        """Picks (runner, tactic) for an op: from the cache when every profile hits, else (in
        tuning mode) profiles every tactic of every runner on every profile."""
        profiles = tuning_config["profiles"]
        runner = runners[0]
        keys = [self.cache_key(custom_op, runner, p) for p in profiles]
        if all(k in self.profiling_cache for k in keys):
            _log(f"[Autotuner]: Config cache hit for {custom_op} "
                 f"(runner={type(runner).__name__}, source=config file)")
            return runner, self.profiling_cache[keys[0]][1]
        if not self.is_tuning_mode:
            return runner, -1
        # tqdm's progress bar; one line per update here (tqdm separates them with \r), so lines
        # of ranks sharing a log file never run together.
        total = sum(len(r.get_valid_tactics(inputs, p)) for r in runners for p in profiles)
        os.write(1, f"[AutoTuner]: Tuning {custom_op}: 0%|          | 0/{total}\n".encode())
        done = 0
        for profile, key in zip(profiles, keys):
            best = None
            for r in runners:
                for tactic in r.get_valid_tactics(inputs, profile):
                    elapsed = self._profile_single_kernel(r, inputs, tactic)
                    done += 1
                    os.write(1, f"[AutoTuner]: Tuning {custom_op}: {100 * done // total}%|"
                                f"{'#' * (10 * done // total):10}| {done}/{total}\n".encode())
                    if best is None or elapsed < best[0]:
                        best = (elapsed, type(r).__name__, tactic)
            self.profiling_cache[key] = (best[1], best[2])
        return runner, self.profiling_cache[keys[0]][1]

    def _profile_single_kernel(self, runner, inputs, tactic, **kwargs):
        """Times one tactic of a runner (warm-up, then timed runs); the ranks agree on the time
        with one all-reduce (MAX) on the tune process group, so they all pick the same tactic."""
        for _ in range(self.warmup):
            runner.forward(inputs, tactic=tactic)
        start = time.perf_counter()
        runner.forward(inputs, tactic=tactic)
        elapsed = torch.tensor([time.perf_counter() - start])
        if self.process_group is not None:
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=self.process_group)
        return float(elapsed[0])


@contextlib.contextmanager
def autotune(tune_mode=True):
    """Turns tuning mode on for the block (choose_one profiles cache misses)."""
    tuner = AutoTuner.get()
    old, tuner.is_tuning_mode = tuner.is_tuning_mode, tune_mode
    try:
        yield
    finally:
        tuner.is_tuning_mode = old
