"""Helpers shared by the test suites: real Terraform runs and real emulator processes."""
