output "hosts" {
  description = "Per SFU: its host's name, tags, ingress rules and cloud-init script."
  value       = local.hosts
}

output "common_tags" {
  description = "Tags for the run's shared resources (network, grid)."
  value       = local.run_tags
}

output "cost" {
  description = "The estimate printed before apply: hosts x price x hours; null price when the instance type has none in hourly_prices."
  value = {
    hosts          = length(local.hosts)
    instance_type  = var.instance_type
    price_per_hour = local.price_per_hour
    hours          = var.hours
    total          = local.price_per_hour == null ? null : length(local.hosts) * local.price_per_hour * var.hours
  }
}
