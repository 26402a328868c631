"""The package as a whole: what `import kproducer` loads."""
