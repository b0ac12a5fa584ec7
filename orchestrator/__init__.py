"""corral's gateway side: container supervisor, config, audit, images and the CLI."""
