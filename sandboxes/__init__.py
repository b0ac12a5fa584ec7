"""The sandbox kinds and their policies. Policy modules are pure logic with no I/O."""
