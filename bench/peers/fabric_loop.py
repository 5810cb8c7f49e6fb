"""Lightning Fabric with the loop a user writes: fabric.setup of the model, the optimizer and
the DataLoader, fabric.backward."""

from __future__ import annotations

from common import arguments, loader, model_and_data, optimizer, own_loop

if __name__ == "__main__":
    args = arguments(__doc__.splitlines()[0]).parse_args()
    import lightning as L

    fabric = L.Fabric(
        accelerator="cuda" if args.device == "cuda" else "cpu",
        devices=1,
        precision="bf16-mixed" if args.device == "cuda" else "32-true",
    )
    fabric.launch()
    net, data = model_and_data(args)
    model, opt = fabric.setup(net, optimizer(net))
    train = fabric.setup_dataloaders(loader(data, args))
    clock = own_loop(model, opt, train, fabric.backward, args)
    clock.report(version=L.__version__)
