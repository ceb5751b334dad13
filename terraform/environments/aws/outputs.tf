output "sfus" {
  description = "What the runner reads: per SFU, the address its clients use and the host's public address for SSH."
  value = {
    for name, h in module.sfu_host : name => {
      address     = h.private_ip
      public_ip   = h.public_ip
      instance_id = h.instance_id
    }
  }
}

output "subnet_id" {
  description = "The subnet the grid's nodes should run in (the cluster's node group)."
  value       = local.subnet_id
}

output "cost" {
  description = "The estimate of the SFU hosts' cost (the Kubernetes cluster's is its own)."
  value       = module.plan.cost
}
