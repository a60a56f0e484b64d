"""One module per Terraform resource type, plus the data sources; schema, plan rules and CRUD side by side."""
