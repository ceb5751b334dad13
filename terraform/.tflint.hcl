# Every rule of tflint's bundled Terraform ruleset, on every module (tests/test_cloud_terraform.py).
# No cloud ruleset: its plugin cannot be fetched where the suite runs.
config {
  call_module_type = "none"
}

plugin "terraform" {
  enabled = true
  preset  = "all"
}
