"""Two simulated hosts sharing a real filesystem (GlusterFS, MooseFS, JuiceFS, CephFS): env.py."""
