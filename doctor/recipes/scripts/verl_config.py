# Library for the scripts that read the installed verl's Hydra config (compose.py, dryrun.py): where
# it is, found without importing verl (that would load torch), and a composition done exactly as
# verl.trainer.main_ppo's @hydra.main(config_path="config", config_name="ppo_trainer", version_base=None).


def verl_config_dir():
    """(verl's version or None, its trainer/config directory); ImportError when there is no verl."""
    import importlib.metadata as md
    import importlib.util as iu

    try:
        version = md.version("verl")
    except Exception:
        version = None
    spec = iu.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("verl is not installed in this interpreter (no module named 'verl')")
    return version, _os.path.join(list(spec.submodule_search_locations)[0], "trainer", "config")


def compose_ppo_trainer(cfg_dir, overrides):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=cfg_dir, version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)
