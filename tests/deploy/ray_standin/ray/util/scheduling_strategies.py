"""Stand-in for ray.util.scheduling_strategies (the class the deploy script uses)."""


class NodeAffinitySchedulingStrategy:
    """Run a task or actor on the node NODE_ID (hex); soft=False: fail rather than go elsewhere.

    Same signature as Ray's. The stand-in records node_id and soft in the actor registry."""

    def __init__(self, node_id: str, soft: bool, _spill_on_unavailable: bool = False,
                 _fail_on_unavailable: bool = False):
        if not isinstance(node_id, str):
            raise TypeError(f"node_id must be a hex string, got {type(node_id).__name__}")
        self.node_id = node_id
        self.soft = soft
        self._spill_on_unavailable = _spill_on_unavailable
        self._fail_on_unavailable = _fail_on_unavailable
