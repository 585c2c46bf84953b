"""Train GCN and GAT on Cora's public split through the eager UDF executor.

    python examples/train_cora.py --data-dir ../shared/data --seeds 0 1 2

Recipes (gnnc.training.PLANETOID_RECIPES) follow the papers: GCN 2 layers x 16
hidden, dropout 0.5, Adam lr 0.01, weight decay 5e-4, 200 epochs; GAT 8 heads x 8
hidden, dropout 0.6 on features and attention, lr 0.005, weight decay 5e-4, up to
1000 epochs with patience 100. Test accuracy is taken at the best validation epoch.
"""
import argparse
import statistics
from pathlib import Path

from gnnc import data
from gnnc.training import planetoid_experiment

PUBLISHED = {"gcn": 81.5, "gat": 83.0}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", help="directory holding planetoid/ (default: gnnc.data.paths's rule)")
    p.add_argument("--dataset", default="cora", choices=["cora", "citeseer"])
    p.add_argument("--models", nargs="+", default=["gcn", "gat"], choices=["gcn", "gat"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    args = p.parse_args()
    try:
        ds = data.load_planetoid(args.dataset, Path(args.data_dir) / "planetoid" if args.data_dir else None)
    except data.paths.DataNotFoundError as err:  # one line naming the folder and the download command
        raise SystemExit(f"train_cora.py: {err}") from None
    for name in args.models:
        accs = []
        for seed in args.seeds:
            result = planetoid_experiment(name, ds, seed=seed)
            accs.append(100 * result.test_acc)
            print(f"{name.upper()} seed {seed}: test {accs[-1]:.1f}% (best val epoch {result.best_epoch}, "
                  f"{result.epochs_run} epochs, {result.seconds:.1f} s)")
        spread = f" +- {statistics.stdev(accs):.1f}" if len(accs) > 1 else ""
        published = f" (published {PUBLISHED[name]}%)" if args.dataset == "cora" else ""
        print(f"{name.upper()} mean test accuracy {statistics.mean(accs):.1f}%{spread}{published}")


if __name__ == "__main__":
    main()
