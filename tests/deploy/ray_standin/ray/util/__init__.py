"""Stand-in for ray.util: list_named_actors and the scheduling_strategies module."""
from . import scheduling_strategies  # noqa: F401  (ray.util.scheduling_strategies)


def list_named_actors(all_namespaces: bool = False):
    """Names of the live named actors of the current namespace, or with all_namespaces=True
    dicts {"namespace": ..., "name": ...} of every namespace (Ray's contract)."""
    import ray

    ray._require_init()
    out = []
    for entry in ray._live_actors():
        if not entry.get("name"):
            continue
        if all_namespaces:
            out.append({"namespace": entry["namespace"], "name": entry["name"]})
        elif entry["namespace"] == ray._state["namespace"]:
            out.append(entry["name"])
    return out
