"""Operations: what runs and watches the pipeline's servers and workers, above the domain.

`local_stack` starts, checks and stops a one-machine stack (Prefect server, MLflow server, workers);
`pool_dispatch` runs a night's training as a flow run of the GPU deployment and waits for it. Both
use the domain (`simpair`) and Prefect's client; flows and the command line use them.
"""
