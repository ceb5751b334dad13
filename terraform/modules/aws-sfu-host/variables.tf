variable "host" {
  description = "One element of the sfu-plan module's `hosts` output: name, tags, ingress rules, cloud-init."
  type = object({
    name      = string
    tags      = map(string)
    ingress   = list(object({ protocol = string, from = number, to = number, cidr = string, why = string }))
    user_data = string
  })
}

variable "instance_type" {
  description = "The instance type; the environment gives every SFU the same one."
  type        = string
}

variable "disk_gb" {
  description = "Root disk size, GB."
  type        = number
}

variable "ami" {
  description = "The machine image (Debian 12, as the local lab runs)."
  type        = string
}

variable "subnet_id" {
  description = "The subnet the host gets its private address in."
  type        = string
}

variable "vpc_id" {
  description = "The VPC of the security group."
  type        = string
}

variable "key_name" {
  description = "An EC2 key pair for SSH, or null for none."
  type        = string
  default     = null
}
