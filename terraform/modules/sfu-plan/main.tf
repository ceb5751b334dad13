# What every cloud's environment needs to know about the SFU hosts, computed without any provider:
# names, tags, firewall rules and the cloud-init script. A provider module (../aws-sfu-host) only
# turns these into resources, so another cloud is one small module and this logic is tested once.
locals {
  prefix = "sfubench-${var.run_id}"
  # the run's own tags, on everything it makes: its id, its owner and when it ends (the sweeper
  # deletes only a run's whose deadline has passed)
  run_tags = merge({ "sfubench:run" = var.run_id, "sfubench:owner" = var.owner },
  var.deadline == "" ? {} : { "sfubench:deadline" = var.deadline })

  hosts = {
    for name, sfu in var.sfus : name => {
      name = "${local.prefix}-${name}"
      tags = merge(local.run_tags, {
        "sfubench:sfu" = name
        Name           = "${local.prefix}-${name}"
      })
      ingress = concat(
        [for p in sfu.tcp_ports : { protocol = "tcp", from = p, to = p, cidr = var.client_cidr, why = "signalling and APIs" }],
        [for r in sfu.udp_ranges : { protocol = "udp", from = r.from, to = r.to, cidr = var.client_cidr, why = "media" }],
        [{ protocol = "tcp", from = var.probe_port, to = var.probe_port, cidr = var.client_cidr, why = "the runner's probe of the SFU" }],
        [{ protocol = "tcp", from = 22, to = 22, cidr = var.operator_cidr, why = "ssh" }],
      )
      user_data = templatefile("${path.module}/cloud-init.sh.tftpl", {
        sfu      = name
        version  = sfu.version
        profile  = var.sfu_profile
        repo_url = var.repo_url
        git_ref  = var.git_ref
        origin   = var.page_origin
        run_id   = var.run_id
        tools    = sfu.toolchains
        key      = var.secrets_public_key
        # the host powers off (and, as the provider module asks, terminates) once the run's budgeted
        # hours are over, whatever became of the runner and of Terraform's state
        deadline_minutes = ceil(var.hours * 60)
      })
    }
  }

  price_per_hour = lookup(var.hourly_prices, var.instance_type, null)
}
