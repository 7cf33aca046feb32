"""The built-in policies, one module each, with the config section it owns."""
