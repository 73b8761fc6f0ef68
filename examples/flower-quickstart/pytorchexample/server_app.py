"""pytorchexample: A Flower / PyTorch app (the quickstart's ServerApp, with cepam)."""

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

import cepam  # cepam
from cepam.flower import CepamStrategy  # cepam

from pytorchexample.task import Net

# Create ServerApp
app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Main entry point for the ServerApp."""
    fraction_evaluate: float = context.run_config["fraction-evaluate"]
    num_rounds: int = context.run_config["num-server-rounds"]
    lr: float = context.run_config["learning-rate"]

    global_model = Net()
    arrays = ArrayRecord(global_model.state_dict())

    # cepam: was `strategy = FedAvg(fraction_evaluate=fraction_evaluate)`
    strategy = CepamStrategy(FedAvg(fraction_evaluate=fraction_evaluate),
                             mechanism=cepam.Gaussian(sigma=float(context.run_config["sigma"])),
                             clip=float(context.run_config["clip"]))

    result = strategy.start(grid=grid, initial_arrays=arrays,
                            train_config=ConfigRecord({"lr": lr}), num_rounds=num_rounds)

    print("\nSaving final model to disk...")
    state_dict = result.arrays.to_torch_state_dict()
    torch.save(state_dict, "final_model.pt")
