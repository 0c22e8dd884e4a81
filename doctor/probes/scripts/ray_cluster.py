# Cluster mode: connect to an existing Ray cluster (the address the user gave; read-only: it starts
# nothing and stops nothing) and, on every alive node, run one task pinned there with
# NodeAffinitySchedulingStrategy that reads distribution versions with importlib.metadata in that
# node's own worker interpreter.
# argv: [address, comma list of distribution names, timeout seconds]
import time

address = _sys.argv[1]
names = [n for n in _sys.argv[2].split(",") if n]
timeout = float(_sys.argv[3]) if len(_sys.argv) > 3 else 60.0
out = {"address": address, "nodes": [], "ok": False}
t0 = time.perf_counter()
try:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    out["driver_ray"] = ray.__version__
    ray.init(address=address, log_to_driver=False, configure_logging=False)

    @ray.remote(num_cpus=0)
    def _versions(names):
        import importlib.metadata as md
        import socket
        import sys

        found = {}
        for n in names:
            try:
                found[n] = md.version(n)
            except Exception:
                found[n] = None
        return {"python": sys.executable, "hostname": socket.gethostname(), "versions": found}

    alive = [n for n in ray.nodes() if n.get("Alive")]
    refs = []
    for n in alive:
        refs.append((n, _versions.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)).remote(names)))
    for n, ref in refs:
        node = {"node_id": n["NodeID"], "ip": n.get("NodeManagerAddress"), "head": "node:__internal_head__" in (n.get("Resources") or {})}
        try:
            node.update(ray.get(ref, timeout=max(5.0, timeout - (time.perf_counter() - t0))))
        except KeyboardInterrupt:  # Ctrl-C, TERM and HUP reach probes as SIGINT: stop now
            raise
        except BaseException as exc:  # noqa: BLE001
            node["error"] = describe_exception(exc)
        out["nodes"].append(node)
    out["ok"] = True
except KeyboardInterrupt:  # Ctrl-C, TERM and HUP reach probes as SIGINT: stop now
    raise
except BaseException as exc:  # noqa: BLE001
    out["error"] = describe_exception(exc)
finally:
    try:
        ray.shutdown()  # disconnects this driver only; the cluster keeps running
    except KeyboardInterrupt:  # Ctrl-C, TERM and HUP reach probes as SIGINT: stop now
        raise
    except BaseException:
        pass
out["seconds"] = round(time.perf_counter() - t0, 3)
emit(out)
