import jax

# Expose 8 virtual CPU devices for sharding/pmap tests; must run before the JAX backend initialises.
jax.config.update('jax_num_cpu_devices', 8)
