"""The Selenium Grid of a cloud run on Kubernetes, through the official Python client: the
manifests of k8s/ (kustomize), applied into a namespace of the run's, the Chrome nodes scaled with
the rooms as they start, and everything deleted at the end."""
from __future__ import annotations

import json
import math
import subprocess
import time

import yaml
from kubernetes import client as k8s
from kubernetes import dynamic
from kubernetes.client.exceptions import ApiException

from ..agent import PROBE_PORT
from ..config import ROOT
from ..probes import RemoteProbe
from .tools import tool

MANIFESTS = ROOT / "k8s"
HUB, NODES = "selenium-hub", "chrome-node"
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


def _node_env(objects: list[dict], name: str) -> str | None:
    for o in objects:
        if o["kind"] == "Deployment" and o["metadata"]["name"] == NODES:
            for c in o["spec"]["template"]["spec"]["containers"]:
                for e in c.get("env", []):
                    if e["name"] == name:
                        return e.get("value")
    return None


class KubeGrid:
    """`api` is a kubernetes.client.ApiClient (from a kubeconfig, or the tests' control plane).
    Deploy, scale and tear down use it; `scale` needs only the rights of the Role in k8s/base."""

    def __init__(self, api: k8s.ApiClient, namespace: str, overlay: str = "base", objects: list[dict] | None = None):
        self.api = api
        self.namespace = namespace
        self.objects = in_namespace(objects if objects is not None else render(overlay), namespace)
        sessions = _node_env(self.objects, "SE_NODE_MAX_SESSIONS")
        if sessions is None or not sessions.isdigit() or int(sessions) < 1:
            raise KubeError(f"the {NODES} Deployment must set SE_NODE_MAX_SESSIONS to a positive number")
        self.sessions_per_node = int(sessions)
        self.apps = k8s.AppsV1Api(api)
        self.core = k8s.CoreV1Api(api)
        self.nodes = 0

    # -- sizing ----------------------------------------------------------------------------------
    def nodes_for(self, cfg, rooms: int) -> int:
        """Chrome nodes for the browsers of the first `rooms` rooms: browser sessions (participants
        per browser to a session) over sessions per node."""
        browsers = min(rooms, cfg.real_rooms) * min(cfg.users_per_room, cfg.real_per_room)
        sessions = math.ceil(browsers / cfg.participants_per_browser)
        return math.ceil(sessions / self.sessions_per_node)

    # -- lifecycle -------------------------------------------------------------------------------
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
        self._wait(lambda: self._ready(HUB) >= 1, timeout, f"the hub ({HUB}) to be ready")

    def scale(self, nodes: int, timeout: float = 600) -> None:
        """Sets the Chrome nodes to `nodes` and waits until that many are ready (and no more run)."""
        try:
            self.apps.patch_namespaced_deployment_scale(NODES, self.namespace, {"spec": {"replicas": nodes}},
                                                        field_manager=FIELD_MANAGER)
        except ApiException as e:
            raise KubeError(f"scaling {NODES} to {nodes}: {_reason(e)}") from None
        self.nodes = nodes
        self._wait(lambda: self._ready(NODES) == nodes and len(self._pods(NODES)) == nodes, timeout,
                   f"{nodes} Chrome node(s) to be ready")

    def teardown(self, timeout: float = 300) -> None:
        """Deletes the run's namespace and everything in it, and waits until it is gone."""
        try:
            self.core.delete_namespace(self.namespace, propagation_policy="Foreground")
        except ApiException as e:
            if e.status != 404:
                raise KubeError(f"deleting namespace {self.namespace}: {_reason(e)}") from None
        self._wait(lambda: not self._namespace_exists(), timeout, f"namespace {self.namespace} to be deleted")

    def url(self) -> str:
        """The hub's address: its load balancer's when it has one, else its in-cluster name."""
        svc = self.core.read_namespaced_service(HUB, self.namespace)
        for ing in (svc.status.load_balancer.ingress or []) if svc.status.load_balancer else []:
            if ing.ip or ing.hostname:
                return f"http://{ing.ip or ing.hostname}:4444"
        return f"http://{HUB}.{self.namespace}.svc:4444"

    def probe(self) -> RemoteProbe:
        """The clients' probe: every ready Chrome node's agent (k8s/base/node.yaml), summed."""
        return RemoteProbe("clients", f"http://{NODES}:{PROBE_PORT}/probe", addresses=self.node_addresses)

    def node_addresses(self) -> list[str]:
        return [p.status.pod_ip for p in self._pods(NODES) if p.status.pod_ip and _ready(p)]

    def listener(self, cfg, timeout: float = 600):
        """(handler, streams) for the run's bus: before a room's browsers open, the nodes for every
        room so far are ready (the runner waits; a room's join time does not include it)."""
        def on_event(stream, record):
            if record.get("event") == "room_started":
                want = self.nodes_for(cfg, record["room"])
                if want > self.nodes:
                    self.scale(want, timeout)
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

    @staticmethod
    def _wait(done, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if done():
                    return
            except ApiException as e:
                if e.status not in (404, 409):
                    raise KubeError(f"waiting for {what}: {_reason(e)}") from None
            if time.monotonic() > deadline:
                raise KubeError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.5)


def _reason(e: ApiException) -> str:
    try:
        return json.loads(e.body).get("message") or e.reason
    except (TypeError, ValueError):
        return f"{e.status} {e.reason}"
