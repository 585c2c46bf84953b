"""End-to-end: GCN and GAT trained through the eager executor reach published Cora accuracy."""
import pytest

from gnnc import data
from gnnc.training import planetoid_experiment


@pytest.mark.parametrize("model, published, epochs", [("gcn", 81.5, 200), ("gat", 83.0, 200)])
def test_cora_accuracy_within_two_points_of_paper(shared_data, model, published, epochs):
    ds = data.load_planetoid("cora", shared_data / "planetoid")
    result = planetoid_experiment(model, ds, seed=0, epochs=epochs, progress=False)
    assert result.test_acc * 100 >= published - 2.0, result
