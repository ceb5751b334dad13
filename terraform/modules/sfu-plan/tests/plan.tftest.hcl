# Offline tests of the SFU hosts' logic: no provider, no cloud API.

variables {
  run_id             = "nightly-42"
  owner              = "ci"
  client_cidr        = "10.42.0.0/16"
  operator_cidr      = "203.0.113.7/32"
  git_ref            = "b940d9a"
  probe_port         = 9470
  secrets_public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGt1c3RvbWtleXRoYXRpc29ubHlmb3J0ZXN0cw sfubench"
  hourly_prices      = { "c5.2xlarge" = 0.34 }
  sfus = {
    janus   = { version = "1.1.2", tcp_ports = [8188, 8088], udp_ranges = [{ from = 20000, to = 20999 }] }
    inhouse = { version = "0.1.0", tcp_ports = [7000], udp_ranges = [{ from = 7001, to = 7001 }] }
  }
}

run "one_identical_host_per_sfu" {
  command = plan

  assert {
    condition     = toset(keys(output.hosts)) == toset(["janus", "inhouse"])
    error_message = "expected one host per SFU"
  }
  assert {
    condition     = output.hosts["janus"].name == "sfubench-nightly-42-janus"
    error_message = "host names must carry the run id and the SFU"
  }
  assert {
    condition     = alltrue([for h in values(output.hosts) : h.tags["sfubench:run"] == "nightly-42" && h.tags["sfubench:owner"] == "ci"])
    error_message = "every host must be tagged with the run and the owner"
  }
  assert {
    condition     = output.hosts["inhouse"].tags["sfubench:sfu"] == "inhouse"
    error_message = "every host must be tagged with its SFU"
  }
}

run "firewall_opens_only_what_the_adapter_lists" {
  command = plan

  assert {
    condition = [for r in output.hosts["janus"].ingress : "${r.protocol}/${r.from}-${r.to}/${r.cidr}"] == [
      "tcp/8188-8188/10.42.0.0/16", "tcp/8088-8088/10.42.0.0/16", "udp/20000-20999/10.42.0.0/16", "tcp/9470-9470/10.42.0.0/16",
      "tcp/22-22/203.0.113.7/32",
    ]
    error_message = "janus's ingress must be its ports and the probe's from the client network, and SSH from the operator only"
  }
  assert {
    condition     = length([for r in output.hosts["inhouse"].ingress : r if r.cidr == "0.0.0.0/0"]) == 0
    error_message = "nothing may be open to the world"
  }
}

run "cloud_init_starts_this_sfu_at_the_runners_commit" {
  command = plan

  assert {
    condition     = strcontains(output.hosts["janus"].user_data, "serve --sfu janus --sfu-profile auto")
    error_message = "cloud-init must start the host's own SFU"
  }
  assert {
    condition     = strcontains(output.hosts["inhouse"].user_data, "checkout --quiet 'b940d9a'")
    error_message = "cloud-init must check out the runner's commit"
  }
}

run "cost_estimate" {
  command = plan

  variables {
    hours = 3
  }
  assert {
    condition     = abs(output.cost.total - 2 * 0.34 * 3) < 1e-9
    error_message = "cost must be hosts x price x hours"
  }
}

run "unknown_price_gives_no_total" {
  command = plan

  variables {
    instance_type = "m7i.large"
  }
  assert {
    condition     = output.cost.total == null
    error_message = "an instance type without a price must not be estimated as free"
  }
}

run "tags_the_runs_deadline_when_given" {
  command = plan

  variables {
    deadline = "2026-12-05T22:00:00Z"
  }
  assert {
    condition     = alltrue([for h in values(output.hosts) : h.tags["sfubench:deadline"] == "2026-12-05T22:00:00Z"])
    error_message = "every host must carry the run's deadline, which the sweeper reads"
  }
  assert {
    condition     = output.common_tags["sfubench:deadline"] == "2026-12-05T22:00:00Z"
    error_message = "the shared resources must carry it too"
  }
}

run "rejects_a_deadline_that_is_not_a_time" {
  command = plan

  variables {
    deadline = "tomorrow"
  }
  expect_failures = [var.deadline]
}

run "rejects_ssh_from_anywhere" {
  command = plan

  variables {
    operator_cidr = "0.0.0.0/0"
  }
  expect_failures = [var.operator_cidr]
}

run "rejects_ssh_from_half_the_internet" {
  command = plan

  variables {
    operator_cidr = "0.0.0.0/1"
  }
  expect_failures = [var.operator_cidr]
}

run "rejects_clients_from_a_block_wider_than_8" {
  command = plan

  variables {
    client_cidr = "10.0.0.0/7"
  }
  expect_failures = [var.client_cidr]
}

run "rejects_a_moving_git_ref" {
  command = plan

  variables {
    git_ref = "main"
  }
  expect_failures = [var.git_ref]
}

run "rejects_bad_udp_range" {
  command = plan

  variables {
    sfus = { janus = { version = "1.1.2", tcp_ports = [8188], udp_ranges = [{ from = 21000, to = 20000 }] } }
  }
  expect_failures = [var.sfus]
}

run "the_token_and_secrets_go_over_ssh_with_the_runs_key_only" {
  command = plan

  variables {
    sfus = {
      livekit = { version = "1.13.5", tcp_ports = [7880], udp_ranges = [{ from = 50000, to = 60000 }] }
      janus   = { version = "1.1.2", tcp_ports = [8188], udp_ranges = [{ from = 20000, to = 20999 }] }
    }
  }
  assert {
    condition = alltrue([for h in values(output.hosts) : strcontains(h.user_data,
    "restrict,command=\"/opt/sfubench/scripts/receive-secrets.sh /etc/sfubench/secrets.env\" ssh-ed25519 AAAAC3")])
    error_message = "on every host the run's key may only write the secrets file"
  }
  assert {
    condition     = alltrue([for h in values(output.hosts) : strcontains(h.user_data, "--secrets /etc/sfubench/secrets.env")])
    error_message = "serve must wait for the delivered token (and secrets) on every host"
  }
  assert {
    condition     = alltrue([for h in values(output.hosts) : !strcontains(h.user_data, "SFUBENCH_RUN_TOKEN")])
    error_message = "the token is never in user data"
  }
}

run "a_plan_without_the_runs_key_is_refused" {
  command = plan

  variables {
    secrets_public_key = ""
  }
  expect_failures = [var.secrets_public_key]
}
