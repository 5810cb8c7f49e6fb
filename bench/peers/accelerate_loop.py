"""Hugging Face accelerate with the loop a user writes: accelerator.prepare of the model, the
optimizer and the DataLoader, accelerator.backward."""

from __future__ import annotations

from common import arguments, loader, model_and_data, optimizer, own_loop

if __name__ == "__main__":
    args = arguments(__doc__.splitlines()[0]).parse_args()
    import accelerate

    accelerator = accelerate.Accelerator(
        cpu=args.device == "cpu", mixed_precision="bf16" if args.device == "cuda" else "no"
    )
    net, data = model_and_data(args)
    model, opt, train = accelerator.prepare(net, optimizer(net), loader(data, args))
    clock = own_loop(model, opt, train, accelerator.backward, args)
    clock.report(version=accelerate.__version__)
