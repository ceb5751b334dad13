"""The tag sweeper: what lost runs left in AWS, found by the tags every resource of a run carries
(`sfubench:run`, whose value, the run's id, says when it started; `sfubench:owner`; and
`sfubench:deadline`, when it ends) rather than by Terraform state, which lives in a run folder that
a dead runner's next checkout wipes. `sfubench cloud-cleanup --tags --older-than 6h` deletes the runs
whose deadline has passed and that are older than that: a live run is never taken, whatever its
age. A run made before the deadline tag existed is judged by its start plus MAX_HOURS, the longest
a run may ask for. Only what carries this project's tags is touched: a resource without the owner
tag, or one inside a run's VPC without that run's tag, is left (and the VPC with it, said).
Deleted in the order AWS allows: instances (waited until terminated), their security groups, then
each run VPC's subnets, route tables and internet gateway, then the VPC."""
from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone

from ..config import ConfigError
from ..progress import Progress

RUN_TAG = "sfubench:run"
OWNER_TAG = "sfubench:owner"
DEADLINE_TAG = "sfubench:deadline"
MAX_HOURS = 24   # the longest --hours a run may ask (cloud-loadtest refuses more)
DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_s(text: str) -> float:
    """'6h', '90m', '2d', '45s' in seconds (ConfigError otherwise)."""
    m = DURATION.fullmatch(text.strip())
    if not m:
        raise ConfigError(f"--older-than wants a duration such as 6h, 90m or 2d, got {text!r}")
    return float(m.group(1)) * UNITS[m.group(2)]


def run_started(run_id: str) -> datetime | None:
    """When a run began, from its id (r<UTC %Y%m%d%H%M%S>); None for a tag that is not a run id."""
    try:
        return datetime.strptime(run_id, "r%Y%m%d%H%M%S").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def _deadline(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def _tags(resource: dict) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags", [])}


def _tagged(ec2, kind: str, key: str) -> list[dict]:
    """Every resource of `kind` (describe_<kind>, whose pages list them under `key`) carrying the run tag."""
    pages = ec2.get_paginator(f"describe_{kind}").paginate(Filters=[{"Name": "tag-key", "Values": [RUN_TAG]}])
    return [r for page in pages for r in page[key]]


class Sweeper:
    """`ec2`: a boto3 EC2 client (the region's). `now`: the clock the age is judged by."""

    def __init__(self, ec2, older_than_s: float, progress: Progress | None = None, now=None):
        self.ec2, self.older_than_s = ec2, older_than_s
        self.progress = progress or Progress()
        self.now = now or (lambda: datetime.now(timezone.utc))
        self.failed: list[str] = []

    def stale(self, resource: dict) -> str | None:
        """The resource's run id when it is this project's (its run and owner tags), that run's
        deadline has passed and it is older than the limit; else None."""
        tags = _tags(resource)
        run_id = tags.get(RUN_TAG, "")
        started = run_started(run_id)
        if started is None or OWNER_TAG not in tags:
            return None
        ends = _deadline(tags.get(DEADLINE_TAG, "")) or started + timedelta(hours=MAX_HOURS)
        now = self.now()
        if now < ends or (now - started).total_seconds() < self.older_than_s:
            return None
        return run_id

    def sweep(self) -> list[str]:
        """Deletes every stale run's resources; returns what could not be deleted, one line each."""
        instances = [i for r in _tagged(self.ec2, "instances", "Reservations") for i in r["Instances"]
                     if i["State"]["Name"] not in ("terminated", "shutting-down") and self.stale(i)]
        if instances:
            ids = [i["InstanceId"] for i in instances]
            self._attempt(f"instances {' '.join(ids)}", self.ec2.terminate_instances, InstanceIds=ids)
            self._attempt("waiting for them to terminate",
                          lambda: self.ec2.get_waiter("instance_terminated").wait(
                              InstanceIds=ids, WaiterConfig={"Delay": 5, "MaxAttempts": 120}))
        for group in _tagged(self.ec2, "security_groups", "SecurityGroups"):
            if self.stale(group):
                self._attempt(f"security group {group['GroupId']}", self.ec2.delete_security_group,
                              GroupId=group["GroupId"])
        for vpc in _tagged(self.ec2, "vpcs", "Vpcs"):
            if run_id := self.stale(vpc):
                self._vpc(vpc["VpcId"], run_id)
        return self.failed

    def _vpc(self, vpc_id: str, run_id: str) -> None:
        """A run's own VPC and what Terraform made in it (what carries the run's tag)."""
        in_vpc = [{"Name": "vpc-id", "Values": [vpc_id]}, {"Name": f"tag:{RUN_TAG}", "Values": [run_id]}]
        for subnet in self.ec2.describe_subnets(Filters=in_vpc)["Subnets"]:
            self._attempt(f"subnet {subnet['SubnetId']}", self.ec2.delete_subnet, SubnetId=subnet["SubnetId"])
        for table in self.ec2.describe_route_tables(Filters=in_vpc)["RouteTables"]:
            if any(a.get("Main") for a in table.get("Associations", [])):
                continue   # goes with the VPC
            for a in table.get("Associations", []):
                self._attempt(f"route table association {a['RouteTableAssociationId']}",
                              self.ec2.disassociate_route_table, AssociationId=a["RouteTableAssociationId"])
            self._attempt(f"route table {table['RouteTableId']}", self.ec2.delete_route_table,
                          RouteTableId=table["RouteTableId"])
        gateways = self.ec2.describe_internet_gateways(
            Filters=[{"Name": "attachment.vpc-id", "Values": [vpc_id]}, in_vpc[1]])["InternetGateways"]
        for gw in gateways:
            gid = gw["InternetGatewayId"]
            self._attempt(f"internet gateway {gid}", self.ec2.detach_internet_gateway, InternetGatewayId=gid, VpcId=vpc_id)
            self._attempt(f"internet gateway {gid}", self.ec2.delete_internet_gateway, InternetGatewayId=gid)
        self._attempt(f"VPC {vpc_id}", self.ec2.delete_vpc, VpcId=vpc_id)

    def _attempt(self, what: str, call, **kwargs) -> None:
        started = time.monotonic()
        try:
            call(**kwargs)
        except Exception as e:   # botocore's errors: the rest is still tried, and this one said
            self.failed.append(f"{what}: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}")
            self.progress.say(f"sweep: {what} NOT deleted: {self.failed[-1]}")
            return
        self.progress.say(f"sweep: {what} deleted ({time.monotonic() - started:.1f} s)")


def sweep(older_than: str, progress: Progress | None = None) -> list[str]:
    """The region's stale runs deleted through boto3 (credentials, region and endpoint as the AWS
    CLI reads them: AWS_DEFAULT_REGION, AWS_ENDPOINT_URL...); returns what failed."""
    import boto3
    return Sweeper(boto3.client("ec2"), duration_s(older_than), progress).sweep()
