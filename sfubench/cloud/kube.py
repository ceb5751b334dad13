"""The clients of a cloud run on Kubernetes, through the official Python client: the manifests of
k8s/ (kustomize: the Selenium Grid and the synthetic participants' generators), applied into a
namespace of the run's, the Chrome nodes and the generators scaled with the rooms as they start,
and everything deleted at the end."""
from __future__ import annotations

import json
import math
import subprocess
import time
from dataclasses import dataclass, field

import yaml
from kubernetes import client as k8s
from kubernetes import dynamic
from kubernetes.client.exceptions import ApiException

from ..agent import PROBE_PORT
from ..config import ROOT
from ..probes import RemoteProbe
from . import sweep
from .tools import tool

MANIFESTS = ROOT / "k8s"
HUB, NODES, SYNTH = "selenium-hub", "chrome-node", "synth"
RUN_SECRET, POLICY, PULL_SECRET = "sfubench-run", "runner-only", "sfubench-pull"
IMAGE = "ghcr.io/sfubench/sfubench"   # the init container's and the generators': built per commit
# What one browser participant costs a node, in cores, at the local profile's 320x180@15 (README,
# "The browser room": a room of 5 took 0.9-1.2 cores; the higher end, so a node keeps its headroom).
CORES_PER_PARTICIPANT = 0.24
FIELD_MANAGER = "sfubench"


class KubeError(RuntimeError):
    pass


def render(overlay: str) -> list[dict]:
    """The objects of k8s/overlays/<overlay> (or k8s/base for "base"), as `kustomize build` gives them."""
    folder = MANIFESTS / ("base" if overlay == "base" else f"overlays/{overlay}")
    if not (folder / "kustomization.yaml").exists():
        known = sorted(p.name for p in (MANIFESTS / "overlays").iterdir())
        raise KubeError(f"no kustomize overlay {overlay!r}; there are: base, {', '.join(known)}")
    r = subprocess.run([tool("kustomize"), "build", str(folder)], capture_output=True, text=True)
    if r.returncode:
        raise KubeError(f"kustomize build {folder.relative_to(ROOT)} failed: {r.stderr.strip()}")
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def in_namespace(objects: list[dict], namespace: str) -> list[dict]:
    """`objects` moved into `namespace`: the Namespace object renamed, namespaced objects and the
    RoleBinding's service-account subjects pointed at it."""
    out = []
    for o in objects:
        o = yaml.safe_load(yaml.safe_dump(o))   # a deep copy
        if o["kind"] == "Namespace":
            o["metadata"]["name"] = namespace
        else:
            o["metadata"]["namespace"] = namespace
        for s in o.get("subjects", []):
            if s.get("kind") == "ServiceAccount":
                s["namespace"] = namespace
        out.append(o)
    return out


def _ready(pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _env(objects: list[dict], deployment: str, name: str) -> dict | None:
    """The env entry `name` of Deployment `deployment`'s first container, as in `objects`."""
    for o in objects:
        if o["kind"] == "Deployment" and o["metadata"]["name"] == deployment:
            for e in o["spec"]["template"]["spec"]["containers"][0].get("env", []):
                if e["name"] == name:
                    return e
    return None


def _named(objects: list[dict], kind: str, name: str) -> dict:
    for o in objects:
        if o["kind"] == kind and o["metadata"]["name"] == name:
            return o
    raise KubeError(f"the manifests have no {kind} {name}")


def _cores(quantity: str) -> float:
    """A Kubernetes CPU quantity ("1250m", "2") in cores."""
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def _positive(objects: list[dict], deployment: str, name: str) -> int:
    e = _env(objects, deployment, name)
    if e is None or not str(e.get("value", "")).isdigit() or int(e["value"]) < 1:
        raise KubeError(f"the {deployment} Deployment must set {name} to a positive number")
    return int(e["value"])


@dataclass(frozen=True)
class GridSpec:
    """A run's grid: the manifests (`objects`, else the kustomize `overlay` rendered), the SFU
    whose signalling the generators speak (`sfu`: the run's), the run's `token`, into the Secret the
    pods read, `runner_cidr`: the runner's address, the only one outside the namespace the
    NetworkPolicy admits; `commit`: the runner's, whose image the pods run (the nightly builds one
    per commit: a tag that never moves); `media`: (profile, digest) of the runner's fake media,
    which each node's init container must reproduce; `pull_secret`: a registry's credentials (a
    Docker config.json's text) where the images are private, applied with the grid as Secret
    `sfubench-pull` that every pod pulls with; `run`: the run's id, owner and deadline (sweep.Tags),
    on the namespace, by which `cloud-cleanup --tags` finds it once its runner is gone."""
    overlay: str = "base"
    objects: list | None = None
    sfu: str | None = None
    token: str = ""
    runner_cidr: str = ""
    commit: str = ""
    media: tuple[str, str] | None = None
    pull_secret: str = ""
    run: dict = field(default_factory=dict)


class KubeGrid:
    """`api` is a kubernetes.client.ApiClient (from a kubeconfig, or the tests' control plane).
    Deploy, scale and tear down use it; `scale` needs only the rights of the Role in k8s/base."""

    def __init__(self, api: k8s.ApiClient, namespace: str, spec: GridSpec = GridSpec()):
        sfu, token, runner_cidr, commit, media, pull_secret = (spec.sfu, spec.token, spec.runner_cidr, spec.commit,
                                                               spec.media, spec.pull_secret)
        self.api = api
        self.namespace = namespace
        self.objects = in_namespace(spec.objects if spec.objects is not None else render(spec.overlay), namespace)
        self.sessions_per_node = _positive(self.objects, NODES, "SE_NODE_MAX_SESSIONS")
        node = _named(self.objects, "Deployment", NODES)["spec"]["template"]["spec"]["containers"][0]
        self.participants_per_node = max(1, int(_cores(node["resources"]["limits"]["cpu"]) / CORES_PER_PARTICIPANT))
        self.streams_per_generator = _positive(self.objects, SYNTH, "SFUBENCH_SYNTH_STREAMS")
        if sfu:
            _env(self.objects, SYNTH, "SFUBENCH_SFU")["value"] = sfu
        self.token = token
        if token:
            _named(self.objects, "Secret", RUN_SECRET)["stringData"]["token"] = token
        if runner_cidr:
            policy = _named(self.objects, "NetworkPolicy", POLICY)["spec"]
            policy["ingress"][1]["from"][0]["ipBlock"]["cidr"] = runner_cidr
            policy["egress"][2]["to"][0]["ipBlock"]["cidr"] = runner_cidr
        if spec.run:
            meta = _named(self.objects, "Namespace", namespace)["metadata"]
            meta.setdefault("labels", {}).update(sweep.namespace_labels(spec.run))
            meta["annotations"] = {**meta.get("annotations", {}), **sweep.namespace_annotations(spec.run)}
        for container in self._containers():
            if commit and container["image"].startswith(IMAGE + ":"):
                container["image"] = f"{IMAGE}:{commit}"
                container["imagePullPolicy"] = "IfNotPresent"   # a commit's image never changes
        if pull_secret:
            self._pull_with(pull_secret)
        if media:
            init = _named(self.objects, "Deployment", NODES)["spec"]["template"]["spec"]["initContainers"][0]
            env = {e["name"]: e for e in init["env"]}
            env["SFUBENCH_MEDIA"]["value"], env["SFUBENCH_MEDIA_DIGEST"]["value"] = media
        self.apps = k8s.AppsV1Api(api)
        self.core = k8s.CoreV1Api(api)
        self.nodes = self.generators = 0

    def _pull_with(self, docker_config: str) -> None:
        self.objects.append({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
                             "metadata": {"name": PULL_SECRET, "namespace": self.namespace},
                             "stringData": {".dockerconfigjson": docker_config}})
        for o in self.objects:
            if o["kind"] == "Deployment":
                o["spec"]["template"]["spec"]["imagePullSecrets"] = [{"name": PULL_SECRET}]

    def _containers(self):
        for o in self.objects:
            if o["kind"] == "Deployment":
                spec = o["spec"]["template"]["spec"]
                yield from spec.get("initContainers", []) + spec["containers"]

    # -- sizing ----------------------------------------------------------------------------------
    def nodes_for(self, cfg, rooms: int) -> int:
        """Chrome nodes for the browser participants of the first `rooms` rooms: as many as their
        CPU needs (a participant costs the same in its own tab or in a shared one), and no fewer
        than their sessions (participants per browser to a session) need slots."""
        browsers = min(rooms, cfg.real_rooms) * min(cfg.users_per_room, cfg.real_per_room)
        sessions = math.ceil(browsers / cfg.participants_per_browser)
        return max(math.ceil(sessions / self.sessions_per_node), math.ceil(browsers / self.participants_per_node))

    def peak_cores(self, cfg) -> float:
        """The CPU the grid's pods reserve at the run's peak: the hub, its nodes, its generators."""
        def requested(name):
            spec = _named(self.objects, "Deployment", name)["spec"]["template"]["spec"]
            return _cores(spec["containers"][0]["resources"]["requests"]["cpu"])
        rooms = cfg.rooms_cap
        return (requested(HUB) + self.nodes_for(cfg, rooms) * requested(NODES)
                + self.generators_for(cfg, rooms) * requested(SYNTH))

    def generators_for(self, cfg, rooms: int) -> int:
        """Generators for the synthetic participants of the first `rooms` rooms: the streams they
        receive (everyone else's in their room) over what one generator carries."""
        browsers = min(rooms, cfg.real_rooms) * min(cfg.users_per_room, cfg.real_per_room)
        synthetic = rooms * cfg.users_per_room - browsers
        return math.ceil(synthetic * (cfg.users_per_room - 1) / self.streams_per_generator)

    # -- lifecycle -------------------------------------------------------------------------------
    def reach_sfu(self, address: str) -> None:
        """Lets the pods reach the run's SFU host (and, beside the runner, nothing else outside):
        known once Terraform has made it, before `deploy`."""
        _named(self.objects, "NetworkPolicy", POLICY)["spec"]["egress"][3]["to"][0]["ipBlock"]["cidr"] = f"{address}/32"

    def deploy(self, timeout: float = 300) -> None:
        """Applies the grid (server-side apply, so a rerun updates it) and waits for the hub."""
        dyn = dynamic.DynamicClient(self.api)
        for o in self.objects:
            resource = dyn.resources.get(api_version=o["apiVersion"], kind=o["kind"])
            try:
                resource.server_side_apply(body=o, name=o["metadata"]["name"],
                                           namespace=o["metadata"].get("namespace"),
                                           field_manager=FIELD_MANAGER, force_conflicts=True)
            except ApiException as e:
                raise KubeError(f"applying {o['kind']} {o['metadata']['name']}: {_reason(e)}") from None
        self._wait(lambda: self._ready(HUB) >= 1, timeout, f"the hub ({HUB}) to be ready", lambda: self._state(HUB),
                   lambda: self._refused(HUB))

    def scale(self, nodes: int, timeout: float = 600) -> None:
        """Sets the Chrome nodes to `nodes` and waits until that many are ready (and no more run)."""
        self._scale(NODES, nodes, timeout, "Chrome node(s)")
        self.nodes = nodes

    def scale_generators(self, generators: int, timeout: float = 600) -> None:
        """The same for the synthetic participants' generators."""
        self._scale(SYNTH, generators, timeout, "synthetic generator(s)")
        self.generators = generators

    def _scale(self, name: str, n: int, timeout: float, what: str) -> None:
        try:
            self.apps.patch_namespaced_deployment_scale(name, self.namespace, {"spec": {"replicas": n}},
                                                        field_manager=FIELD_MANAGER)
        except ApiException as e:
            raise KubeError(f"scaling {name} to {n}: {_reason(e)}") from None
        self._wait(lambda: self._ready(name) == n and len(self._pods(name)) == n, timeout, f"{n} {what} to be ready",
                   lambda: self._state(name))

    def teardown(self, timeout: float = 300) -> None:
        """Deletes the run's namespace and everything in it, and waits until it is gone."""
        try:
            self.core.delete_namespace(self.namespace, propagation_policy="Foreground")
        except ApiException as e:
            if e.status != 404:
                raise KubeError(f"deleting namespace {self.namespace}: {_reason(e)}") from None
        self._wait(lambda: not self._namespace_exists(), timeout, f"namespace {self.namespace} to be deleted")

    def url(self) -> str:
        """The hub's address: its Ready pod's, which a runner in the VPC reaches as it reaches the
        nodes' agents and the generators (no load balancer to wait for, pay for or leave public,
        and no cluster DNS, which only the cluster resolves)."""
        hubs = self.addresses(HUB)
        if not hubs:
            raise KubeError(f"the hub ({HUB}) has no ready pod (pods: {self._state(HUB)})")
        return f"http://{hubs[0]}:4444"

    def probe(self) -> RemoteProbe:
        """The clients' probe: the agent of every ready Chrome node and generator, summed."""
        return RemoteProbe("clients", f"http://clients:{PROBE_PORT}/probe",
                           addresses=lambda: self.addresses(NODES) + self.addresses(SYNTH), token=self.token)

    def addresses(self, name: str) -> list[str]:
        """The addresses of Deployment `name`'s ready pods (a runner in the VPC reaches them)."""
        return [p.status.pod_ip for p in self._pods(name) if p.status.pod_ip and _ready(p)]

    def listener(self, cfg, timeout: float = 600):
        """(handler, streams) for the run's bus: before a room's participants join, the nodes and
        generators for every room so far are ready (the runner waits; a room's join time does not
        include it), those of a node the cluster lost since included."""
        def on_event(stream, record):
            if record.get("event") == "room_started":
                want = max(self.nodes, self.nodes_for(cfg, record["room"]))
                if want > self.nodes or self._ready(NODES) < want:
                    self.scale(want, timeout)
                want = max(self.generators, self.generators_for(cfg, record["room"]))
                if want > self.generators or self._ready(SYNTH) < want:
                    self.scale_generators(want, timeout)
        return on_event, ["events"]

    # -- internals -------------------------------------------------------------------------------
    def _ready(self, name: str) -> int:
        """Ready pods of Deployment `name`, counted from the pods themselves: the Deployment's own
        status trails them by however long its controllers take (minutes, once, in the suite)."""
        return sum(1 for p in self._pods(name) if _ready(p))

    def _pods(self, name: str) -> list:
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=f"app.kubernetes.io/name={name}")
        return [p for p in pods.items if p.metadata.deletion_timestamp is None]

    def _namespace_exists(self) -> bool:
        try:
            self.core.read_namespace(self.namespace)
            return True
        except ApiException as e:
            if e.status == 404:
                return False
            raise

    def _refused(self, name: str) -> str:
        """Why the cluster refuses to create Deployment `name`'s pods (its admission, as the
        ReplicaSet's controller reports it), or "": a grid whose pods are refused never comes up."""
        sets = self.apps.list_namespaced_replica_set(self.namespace, label_selector=f"app.kubernetes.io/name={name}")
        return "; ".join(c.message for rs in sets.items for c in rs.status.conditions or []
                         if c.type == "ReplicaFailure" and c.status == "True" and c.message)

    def _state(self, name: str) -> str:
        """Deployment `name`'s pods as the API server has them, for a timeout to say what it saw."""
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=f"app.kubernetes.io/name={name}").items
        return "; ".join(
            f"{p.metadata.name} {p.status.phase}" + (" (deleting)" if p.metadata.deletion_timestamp else "") + ": "
            + ", ".join(f"{c.type}={c.status}" + (f" {c.reason}" if c.reason else "") for c in p.status.conditions or [])
            for p in pods) or "no pods"

    @staticmethod
    def _wait(done, timeout: float, what: str, state=None, refused=None) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if done():
                    return
                why = refused() if refused else ""
                if why:
                    raise KubeError(f"waiting for {what}: the cluster refuses its pods: {why}")
            except ApiException as e:
                if e.status not in (404, 409):
                    raise KubeError(f"waiting for {what}: {_reason(e)}") from None
            if time.monotonic() > deadline:
                try:
                    seen = f" (pods: {state()})" if state else ""
                except ApiException as e:
                    seen = f" (pods unreadable: {_reason(e)})"
                raise KubeError(f"timed out after {timeout:.0f} s waiting for {what}{seen}")
            time.sleep(0.5)


def _reason(e: ApiException) -> str:
    try:
        return json.loads(e.body).get("message") or e.reason
    except (TypeError, ValueError):
        return f"{e.status} {e.reason}"
