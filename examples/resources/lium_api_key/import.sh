terraform import lium_api_key.pipeline 3b2a1f0e-9d8c-4b7a-8f6e-5d4c3b2a1f0e
