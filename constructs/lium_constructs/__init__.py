"""Typed CDKTF constructs for the lium provider (generated from its schema), and the high-level GpuStack."""
