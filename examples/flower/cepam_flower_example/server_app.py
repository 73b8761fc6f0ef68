"""The ServerApp: FedAvg wrapped by ``CepamStrategy`` (keys by X25519 agreement
or pre-shared, eps per round from cepam.accounting, an optional budget and
ledger), run by Flower's own loop, and the test accuracy of the global model
after every round."""

from __future__ import annotations

from flwr.app import ArrayRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

import cepam
from cepam.accounting import FLSetting
from cepam.flower import CepamStrategy

from . import task

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    cfg = context.run_config
    nodes = int(cfg["min-nodes"])
    setting = FLSetting(clip=float(cfg["clip"]), clients=max(nodes, 2),
                        # single-sample steps: one sample drawn per step
                        samples_per_round=int(cfg["sgd-steps"]),
                        dataset_size=task.TRAIN // int(cfg["num-clients"]))
    strategy = CepamStrategy(
        FedAvg(fraction_evaluate=0.0, min_train_nodes=nodes, min_available_nodes=nodes),
        mechanism=cepam.Gaussian(sigma=float(cfg["sigma"])), clip=float(cfg["clip"]),
        setting=setting, delta=float(cfg["delta"]),
        max_epsilon=float(cfg["max-epsilon"]) or None, pad=str(cfg["pad"]) or None,
        secrets=str(cfg["secrets-file"]) or None, pinned_keys=str(cfg["pinned-keys"]) or None,
        authenticated_transport=bool(cfg["authenticated-transport"]),
        signed_keys=bool(cfg["signed-keys"]),
        ledger=str(cfg["ledger"]) or None)
    folder = task.data_dir(str(cfg["data-dir"]))
    _, _, x_test, y_test = task.mnist(folder)
    net = task.model(int(cfg["seed"]))

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        net.load_state_dict(arrays.to_torch_state_dict())
        return MetricRecord({"test-accuracy": task.accuracy(net, x_test, y_test)})

    result = strategy.start(grid=grid, initial_arrays=ArrayRecord(net.state_dict()),
                            num_rounds=int(cfg["num-server-rounds"]), evaluate_fn=evaluate)
    final = max(result.evaluate_metrics_serverapp)
    released = result.train_metrics_clientapp
    print(f"cepam: {len(released)} rounds released, "
          f"{sum(int(m['cepam-updates']) for m in released.values())} replies accepted, "
          f"{sum(int(m['cepam-dropped']) for m in released.values())} dropped; round {final}: "
          f"test accuracy {result.evaluate_metrics_serverapp[final]['test-accuracy']:.4f}",
          flush=True)
