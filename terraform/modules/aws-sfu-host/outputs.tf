output "private_ip" {
  description = "The address the SFU listens on; the grid's nodes reach it inside the VPC."
  value       = aws_instance.sfu.private_ip
}

output "public_ip" {
  description = "For SSH from the operator's address."
  value       = aws_instance.sfu.public_ip
}

output "instance_id" {
  description = "The EC2 instance."
  value       = aws_instance.sfu.id
}
