"""config.py compared whole: every setting's check and its exact sentence, in both voices (a configuration dict in a
file, and ``CacheConfig`` from Python), the defaults filled in, and the config built from checked settings."""
from __future__ import annotations

import pytest

import simcache
from simcache.config import (
    DRIVERS,
    MAX_SLOTS,
    OPTIONAL_SETTINGS,
    POLICIES,
    SETTINGS,
    STOP_POLICIES,
    CacheConfig,
    check_settings,
    from_settings,
)
from simcache.errors import ConfigError, ScenarioError
from simcache.versions import Flags

WHOLE = ("page_size", "device_kv", "device_mamba", "host_kv", "host_mamba", "prefetch_threshold",
         "load_back_threshold")
DEFAULTS = {"policy": "write_through", "storage": False, "page_size": 1, "device_kv": 32, "device_mamba": 8,
            "host_kv": 8, "host_mamba": 8, "prefetch_threshold": 1, "load_back_threshold": 10,
            "prefetch_stop_policy": "best_effort", "driver": "fuzz"}


def refused(raw, where="config") -> str:
    with pytest.raises(ScenarioError) as e:
        check_settings(raw, where)
    return str(e.value)


def config_refused(**kw) -> str:
    with pytest.raises(ConfigError) as e:
        CacheConfig(**kw)
    return str(e.value)


def test_the_tables_name_every_setting_and_choice():
    assert SETTINGS == DEFAULTS
    assert OPTIONAL_SETTINGS == {"write_through_threshold", "mamba_extra_buffer", "cfg_index", "auto_complete"}
    assert POLICIES == ("write_through", "write_through_selective", "write_back")
    assert STOP_POLICIES == ("best_effort", "wait_complete", "timeout")
    assert DRIVERS == ("fuzz", "scheduler")
    assert MAX_SLOTS == 1_048_576


def test_no_settings_are_all_the_defaults_and_the_threshold_follows_the_policy():
    assert check_settings(None) == {**DEFAULTS, "write_through_threshold": 1}
    assert check_settings({}) == {**DEFAULTS, "write_through_threshold": 1}
    for policy in ("write_through_selective", "write_back"):
        assert check_settings({"policy": policy}) == {**DEFAULTS, "policy": policy, "write_through_threshold": 2}
    assert check_settings({"policy": "write_back", "write_through_threshold": 0}) == {
        **DEFAULTS, "policy": "write_back", "write_through_threshold": 0}
    raw = {"policy": "write_back"}
    check_settings(raw)
    assert raw == {"policy": "write_back"}  # the caller's dict is not filled in


def test_every_setting_given_is_kept_as_given():
    raw = {"policy": "write_through_selective", "storage": True, "page_size": 4, "device_kv": 64, "device_mamba": 6,
           "host_kv": 40, "host_mamba": 7, "prefetch_threshold": 3, "load_back_threshold": 0,
           "prefetch_stop_policy": "timeout", "driver": "scheduler", "write_through_threshold": 5,
           "mamba_extra_buffer": True, "cfg_index": 9, "auto_complete": False}
    assert check_settings(raw) == raw
    assert check_settings({"page_size": 1, "mamba_extra_buffer": False}) == {
        **DEFAULTS, "mamba_extra_buffer": False, "write_through_threshold": 1}


def test_a_configuration_that_is_not_a_mapping_is_named_with_an_example():
    for raw in ([], "write_back", 3, ["policy"]):
        assert refused(raw, "ops.config") == ('ops.config must be an object of settings, like '
                                              '{"policy": "write_through"}')


def test_unknown_keys_are_named_sorted_with_every_known_key():
    known = ("auto_complete, cfg_index, device_kv, device_mamba, driver, host_kv, host_mamba, load_back_threshold, "
             "mamba_extra_buffer, page_size, policy, prefetch_stop_policy, prefetch_threshold, storage, "
             "write_through_threshold")
    assert refused({"zeta": 1, "alpha": 2, "policy": "write_back"}) == (
        f"config has unknown key(s) alpha, zeta; known keys: {known}")
    assert refused({3: 1}, "scenario.config") == f"scenario.config has unknown key(s) 3; known keys: {known}"


@pytest.mark.parametrize("key", [*WHOLE, "write_through_threshold"])
def test_each_number_in_a_file_is_whole_and_between_0_and_max_slots(key):
    for bad in (-1, MAX_SLOTS + 1, 1.5, True, "3", None):
        assert refused({key: bad}) == f"config.{key} must be a whole number between 0 and 1048576, not {bad!r}"
    top = check_settings({key: MAX_SLOTS, **({} if key != "page_size" else {"mamba_extra_buffer": True})})
    assert top[key] == MAX_SLOTS
    if key != "page_size":
        assert check_settings({key: 0})[key] == 0


def test_page_size_in_a_file_is_at_least_1():
    assert refused({"page_size": 0}, "s.config") == "s.config.page_size must be at least 1"


def test_each_choice_in_a_file_names_its_options_and_the_bad_value():
    assert refused({"policy": "lru"}) == ("config.policy must be one of write_through, write_through_selective, "
                                          "write_back, not 'lru'")
    assert refused({"policy": ["write_back"]}) == ("config.policy must be one of write_through, "
                                                   "write_through_selective, write_back, not ['write_back']")
    long = "p" * 60  # a file's own value is said back whole (it was read from a bounded file)
    assert refused({"policy": long}) == ("config.policy must be one of write_through, write_through_selective, "
                                         f"write_back, not '{long}'")
    assert refused({"auto_complete": long}) == f"config.auto_complete must be true or false, not '{long}'"
    assert refused({"storage": "yes"}) == "config.storage must be true or false, not 'yes'"
    assert refused({"storage": 1}) == "config.storage must be true or false, not 1"
    assert refused({"driver": "chaos"}) == "config.driver must be fuzz or scheduler, not 'chaos'"
    assert refused({"prefetch_stop_policy": "never"}) == (
        "config.prefetch_stop_policy must be best_effort, wait_complete or timeout, not 'never'")
    assert refused({"prefetch_stop_policy": 2}) == (
        "config.prefetch_stop_policy must be best_effort, wait_complete or timeout, not 2")
    for key in ("mamba_extra_buffer", "auto_complete"):
        assert refused({key: 0}) == f"config.{key} must be true or false, not 0"
        assert refused({key: "true"}) == f"config.{key} must be true or false, not 'true'"
    for driver in DRIVERS:
        assert check_settings({"driver": driver})["driver"] == driver
    for stop in STOP_POLICIES:
        assert check_settings({"prefetch_stop_policy": stop})["prefetch_stop_policy"] == stop


def test_the_first_problem_is_the_one_named():
    # numbers first, then policy, storage, driver, stop policy, the two flags, the extra buffer
    assert refused({"host_kv": -1, "page_size": 0, "policy": "x"}) == (
        "config.host_kv must be a whole number between 0 and 1048576, not -1")
    assert refused({"page_size": 0, "policy": "x"}) == "config.page_size must be at least 1"
    assert refused({"policy": "x", "storage": 1}).startswith("config.policy ")
    assert refused({"storage": 1, "driver": "x"}).startswith("config.storage ")
    assert refused({"driver": "x", "prefetch_stop_policy": "x"}).startswith("config.driver ")
    assert refused({"prefetch_stop_policy": "x", "auto_complete": 1}).startswith("config.prefetch_stop_policy ")
    assert refused({"mamba_extra_buffer": 1, "auto_complete": 1}).startswith("config.mamba_extra_buffer ")
    assert refused({"auto_complete": 1, "page_size": 2}).startswith("config.auto_complete ")


def test_the_extra_buffer_in_a_file_must_match_the_page_size():
    msg = "config.mamba_extra_buffer must be true exactly when page_size > 1"
    assert refused({"page_size": 2, "mamba_extra_buffer": False}) == msg
    assert refused({"page_size": 1, "mamba_extra_buffer": True}) == msg
    assert check_settings({"page_size": 2})["page_size"] == 2  # absent: it follows the page size
    assert "mamba_extra_buffer" not in check_settings({"page_size": 2})


def test_cache_config_defaults_and_its_dict():
    c = CacheConfig()
    assert (c.page_size, c.device_kv, c.device_mamba, c.host_kv, c.host_mamba, c.policy, c.storage,
            c.prefetch_threshold, c.write_through_threshold, c.load_back_threshold, c.prefetch_stop_policy,
            c.flags, c.device, c.auto_complete) == (1, 32, 8, 8, 8, "write_through", False, 1, None, 10,
                                                    "best_effort", Flags(), "cpu", True)
    assert c.as_dict() == {"page_size": 1, "device_kv": 32, "device_mamba": 8, "host_kv": 8, "host_mamba": 8,
                           "policy": "write_through", "storage": False, "prefetch_threshold": 1,
                           "write_through_threshold": None, "load_back_threshold": 10,
                           "prefetch_stop_policy": "best_effort", "flags": Flags().as_dict(), "device": "cpu",
                           "auto_complete": True}
    flags = simcache.preset("followup_fix")
    assert CacheConfig(flags=flags).as_dict()["flags"] == flags.as_dict()
    assert CacheConfig(flags=flags).as_dict()["flags"] != Flags().as_dict()


def test_threshold_and_extra_buffer():
    assert CacheConfig().threshold == 1
    assert CacheConfig(policy="write_through_selective").threshold == 2
    assert CacheConfig(policy="write_back").threshold == 2
    assert CacheConfig(policy="write_back", write_through_threshold=0).threshold == 0
    assert CacheConfig(policy="write_through", write_through_threshold=5).threshold == 5
    assert CacheConfig().extra_buffer is False
    assert CacheConfig(page_size=2).extra_buffer is True


@pytest.mark.parametrize("key", WHOLE)
def test_each_number_in_python_is_a_whole_number_at_its_lowest_value(key):
    low = 1 if key == "page_size" else 0
    for bad in (low - 1, 2.0, True, "4", None):
        assert config_refused(**{key: bad}) == f"{key} must be a whole number >= {low}, not {bad!r}"
    long = "x" * 100
    assert config_refused(**{key: long}) == (f"{key} must be a whole number >= {low}, not "
                                             f"{repr(long)[:40]}... (102 characters)")
    assert getattr(CacheConfig(**{key: low}), key) == low


def test_python_pools_are_at_most_max_slots_and_other_numbers_are_not_capped():
    for key in ("device_kv", "device_mamba", "host_kv", "host_mamba"):
        assert config_refused(**{key: MAX_SLOTS + 1}) == (
            f"{key} = 1048577 is too large; keep pools at most 1048576 slots")
        assert getattr(CacheConfig(**{key: MAX_SLOTS}), key) == MAX_SLOTS
    assert CacheConfig(load_back_threshold=MAX_SLOTS + 1).load_back_threshold == MAX_SLOTS + 1


def test_python_choices_and_flags_are_one_sentence_each():
    assert config_refused(policy="lru") == ("policy must be one of write_through, write_through_selective, "
                                            "write_back, not 'lru'")
    assert config_refused(policy="p" * 60) == ("policy must be one of write_through, write_through_selective, "
                                               f"write_back, not '{'p' * 39}... (62 characters)")
    assert config_refused(policy=None) == ("policy must be one of write_through, write_through_selective, "
                                           "write_back, not None")
    assert config_refused(storage=1) == "storage must be true or false, not 1"
    assert config_refused(prefetch_stop_policy="never") == (
        "prefetch_stop_policy must be best_effort, wait_complete or timeout")
    assert config_refused(prefetch_stop_policy=None) == (
        "prefetch_stop_policy must be best_effort, wait_complete or timeout")
    assert config_refused(auto_complete=1) == "auto_complete must be true or false, not 1"
    assert config_refused(auto_complete="y" * 60) == (
        f"auto_complete must be true or false, not '{'y' * 39}... (62 characters)")
    for bad in (-1, 1.0, "2", False):
        assert config_refused(write_through_threshold=bad) == "write_through_threshold must be a whole number >= 0"
    assert CacheConfig(write_through_threshold=0).write_through_threshold == 0
    assert config_refused(flags={"stale_guards": True}) == (
        "flags must be a Flags (e.g. simcache.preset('pre_fix')), not dict")
    assert config_refused(flags=None) == "flags must be a Flags (e.g. simcache.preset('pre_fix')), not NoneType"
    assert config_refused(device=7) == "device must be None, 'cpu' or 'cuda', not 7"
    assert config_refused(device=["c" * 80]) == (
        f"device must be None, 'cpu' or 'cuda', not ['{'c' * 38}... (84 characters)")
    for device in ("cpu", "CPU", " cpu "):
        assert CacheConfig(device=device).device == device


def test_python_checks_come_in_order():
    assert config_refused(page_size=0, policy="x") == "page_size must be a whole number >= 1, not 0"
    assert config_refused(policy="x", storage=1).startswith("policy ")
    assert config_refused(storage=1, prefetch_stop_policy="x").startswith("storage ")
    assert config_refused(prefetch_stop_policy="x", auto_complete=1).startswith("prefetch_stop_policy ")
    assert config_refused(auto_complete=1, write_through_threshold=-1).startswith("auto_complete ")
    assert config_refused(write_through_threshold=-1, host_kv=MAX_SLOTS + 1).startswith("write_through_threshold ")
    assert config_refused(host_kv=MAX_SLOTS + 1, flags=None).startswith("host_kv = ")
    assert config_refused(flags=None, device=7).startswith("flags ")
    # python has no driver and no extra-buffer rule: a page size above 1 needs nothing more
    assert CacheConfig(page_size=16).page_size == 16


def test_a_device_python_cannot_use_is_one_sentence():
    with pytest.raises(ConfigError) as e:
        CacheConfig(device="meta")
    assert str(e.value).startswith("device must be one of ")
    assert str(e.value).endswith("(like cuda:0), not 'meta'")


def test_from_settings_builds_the_config_field_by_field():
    flags = simcache.preset("merged_fix")
    cfg = check_settings({"policy": "write_through_selective", "storage": True, "page_size": 4, "device_kv": 64,
                          "device_mamba": 6, "host_kv": 40, "host_mamba": 7, "prefetch_threshold": 3,
                          "load_back_threshold": 0, "prefetch_stop_policy": "timeout", "driver": "scheduler",
                          "write_through_threshold": 5, "auto_complete": False})
    assert from_settings(cfg, flags) == CacheConfig(
        page_size=4, device_kv=64, device_mamba=6, host_kv=40, host_mamba=7, policy="write_through_selective",
        storage=True, prefetch_threshold=3, write_through_threshold=5, load_back_threshold=0,
        prefetch_stop_policy="timeout", flags=flags, auto_complete=False, device="cpu")
    plain = from_settings(check_settings(None), Flags())
    assert plain == CacheConfig(write_through_threshold=1)
    assert plain.auto_complete is True
    assert from_settings(check_settings(None), Flags(), device="CPU").device == "CPU"


def test_from_settings_turns_a_config_refusal_into_a_scenario_sentence():
    cfg = {**check_settings(None), "host_kv": MAX_SLOTS + 1}
    with pytest.raises(ScenarioError) as e:
        from_settings(cfg, Flags())
    assert type(e.value) is ScenarioError
    assert str(e.value) == "host_kv = 1048577 is too large; keep pools at most 1048576 slots"
    assert e.value.__cause__ is None and e.value.__suppress_context__ is True
    with pytest.raises(ScenarioError) as e:
        from_settings(check_settings(None), Flags(), device="tpu")
    assert "not 'tpu'" in str(e.value)
