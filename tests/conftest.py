"""Shared pytest settings: under CI (the CI environment variable set), hypothesis runs a fixed, derandomised set
of examples so that a run can be repeated exactly; elsewhere every run explores new random examples. And the
longest tests start first, so that when the suite runs on several cores (pytest-xdist) no core is left with one
long test at the end while the others wait. The shared fixtures, each saying what it gives: browser (the system's
Chromium driven by Playwright; without either the browser tests skip with a one-line reason, under CI=true they
fail) and its pages, base_checkpoints and notes."""

import os
from pathlib import Path

import pytest
from hypothesis import settings

from oneblock import machine
from checkpoint_edits import write_bases
from run_helpers import own_text, served

LONGEST_FIRST = ["test_fuzz_checkpoints.py", "test_readme.py", "test_bench.py", "test_torch_train.py",
                 "test_explorer.py", "test_grown.py"]  # the files whose tests take longest, each a minute or two


# The tiers. `python3 -m pytest` (the README's command) runs the fast one, whatever is neither slow nor browser:
# pyproject.toml's addopts deselect the others; `-m slow`, `-m browser`, or `-m "slow or browser"` runs them
# (.ci/run runs every tier). A test is slow when it takes a second or more (pytest --durations=0 on the
# lab's 2-vCPU machine): it trains for seconds, runs the lab's commands in subprocesses, or drives a grid. A
# browser test is one that uses the browser fixture (Chromium), found by its fixtures.
SLOW_FILES = [
    "test_bench.py", "test_bench_tricks.py", "test_compare.py", "test_depth.py", "test_drops.py",
    "test_fuzz_checkpoints.py", "test_grown.py", "test_layout.py",
    "test_lessons_trained.py", "test_model_props.py", "test_one_block_fixture.py", "test_one_config.py",
    "test_outputs.py", "test_page_loader.py", "test_positions.py", "test_readme.py", "test_scale.py",
    "test_scaling_grid.py", "test_spread.py", "test_torch_train.py",
]  # every test of these files
SLOW_TESTS = {  # and these tests of the others (each parametrized case of them)
    "test_bpe_out.py": ["test_a_training_that_runs_out_of_memory_is_one_line_and_writes_nothing",
                        "test_sixty_megabytes_of_words_train_under_one_gigabyte"],
    "test_checkpoint_trust.py": ["test_a_checkpoint_larger_than_memory_is_refused_before_it_is_read",
                                 "test_an_export_that_cannot_be_written_is_one_line_and_leaves_the_old_export"],
    "test_experiment_cli.py": ["test_a_fifo_or_a_device_as_the_record_is_one_line_from_every_command",
                               "test_a_record_whose_numbers_its_runs_do_not_give_stays_not_ok_exit_1",
                               "test_a_rerun_further_from_the_record_than_its_seeds_spread_is_not_ok_exit_1",
                               "test_a_run_stopped_while_it_writes_its_record_leaves_the_old_one_and_nothing_else",
                               "test_a_second_run_on_one_out_is_refused_at_once_naming_the_path_and_its_holder",
                               "test_a_write_that_fails_at_the_end_is_one_line_and_keeps_the_old_record",
                               "test_plots_refuses_a_damaged_record_before_training",
                               "test_plots_keeps_its_pictures_when_a_write_fails"],
    "test_explore_server.py": ["test_a_checkpoint_cannot_export_a_file_it_names_elsewhere",
                               "test_a_model_too_large_for_the_page_is_refused_naming_it",
                               "test_a_signalled_export_says_so_in_one_line_and_leaves_the_old_export",
                               "test_an_export_never_writes_through_a_link",
                               "test_an_export_replaces_only_an_export",
                               "test_an_idle_connection_is_closed_after_the_timeout",
                               "test_data_names_the_text_and_is_checked_against_the_checkpoint",
                               "test_explore_py_answers_bad_requests_and_rebinding_pages_and_stops_cleanly",
                               "test_the_export_holds_no_path_of_the_machine",
                               "test_the_export_keeps_the_privacy_of_what_it_was_made_from",
                               "test_the_text_beside_the_checkpoint_is_found_wherever_explore_runs",
                               "test_two_exports_into_one_folder_do_not_mix"],
    "test_grid.py": ["test_a_grid_killed_with_sigkill_resumes_computing_only_the_missing_tasks",
                     "test_a_local_dask_cluster_admits_no_other_client_and_serves_no_http",
                     "test_a_pool_of_two_workers_and_a_dask_cluster_of_two_give_the_serial_results_bit_for_bit",
                     "test_a_task_that_raises_stops_the_grid_naming_it_and_the_finished_results_stay",
                     "test_each_process_pool_worker_computes_with_one_blas_thread",
                     "test_the_workers_of_a_grid_killed_with_sigkill_end_with_it"],
    "test_lessons.py": ["test_bad_arguments_are_refused_in_one_line_with_status_2",
                        "test_the_page_folds_the_answers_that_train_as_this_machine_prints_them_within_the_kernels_spread"],
    "test_lessons_scaling.py": ["test_the_export_gives_the_page_the_lessons_own_answer"],
    "test_locks.py": ["test_a_signalled_tokenizer_training_says_so_in_one_line_and_leaves_nothing",
                      "test_a_signalled_training_run_says_so_in_one_line_and_leaves_only_whole_checkpoints",
                      "test_a_training_run_signalled_before_it_trains_writes_nothing_and_says_so"],
    "test_missing_packages.py": ["test_the_standard_library_paths_need_no_package"],
    "test_nothing_lost.py": ["test_a_checkpoint_that_cannot_be_written_stops_the_run_keeping_the_last_one",
                             "test_a_fifo_or_a_device_is_refused_at_once_not_read"],
    "test_numpy_paths.py": ["test_full_central_difference_gradient_check_at_series_size",
                            "test_series_size_batch_gradients"],
    "test_plots.py": ["test_plots_run_headless_and_write_every_png"],
    "test_sample.py": ["test_greedy_follows_the_reference_models_argmax"],
    "test_scaling.py": ["test_a_rerun_gives_each_verdict_on_records_made_up_around_its_loss",
                        "test_a_story_read_straight_from_its_indices_is_the_story_its_words_make"],
    "test_scaling_judged.py": ["test_floors_by_cut_find_the_floor_of_a_law_that_holds_with_both_fits",
                               "test_held_out_cells_are_predicted_exactly_when_the_law_holds",
                               "test_held_out_errors_are_the_predictions_against_the_measurements"],
    "test_torch_model.py": ["test_grown_numpy_paths_match_the_twin_in_every_intermediate_and_gradient",
                            "test_the_twin_is_independent_of_the_numpy_path"],
    "test_train.py": ["test_sigkill_then_resume_gives_bit_identical_weights", "test_the_backends_take_the_same_steps"],
    "test_workbook.py": ["test_a_step_that_never_returns_is_stopped_and_the_others_are_graded",
                         "test_the_learners_path_write_check_then_a_planted_bug_and_a_guess"],
}


def pytest_collection_modifyitems(items):
    """Mark each test with its tier (slow, browser; the fast tier is the rest), then run the tests of
    LONGEST_FIRST's files first, in its order, and the others after them as collected."""
    for item in items:
        name = getattr(item, "originalname", None) or item.name.split("[")[0]
        if item.path.name in SLOW_FILES or name in SLOW_TESTS.get(item.path.name, ()):
            item.add_marker(pytest.mark.slow)
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # (a stable sort: each file keeps its order)

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

IN_CI = os.environ.get("CI", "").lower() in ("true", "1")


def open_page(browser, url, width=1280, init_script=None):
    """A new page (a context of its own, so an empty localStorage) at url, loaded and ready (window.ready), and the
    list its console errors and page errors go to; init_script runs in the page before its own scripts."""
    page = browser.new_page(viewport={"width": width, "height": 900}, accept_downloads=True)
    errors = []
    page.on("console", lambda m: m.type == "error" and errors.append(f"console: {m.text}"))
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    if init_script:
        page.add_init_script(init_script)
    page.goto(url)
    page.wait_for_function("window.ready === true")
    return page, errors


@pytest.fixture(scope="module")
def browser():
    """The system's Chromium, headless, driven by Playwright, for one test module's tests."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        reason = "Playwright is not installed (python3 -m pip install -r tests/requirements.txt)"
    else:
        reason = None if machine.find_chromium() else ("no Chromium found (chromium, chromium-browser or"
                                                       " google-chrome on PATH; .ci/run installs it with apt-get)")
    if reason:
        if IN_CI:
            pytest.fail(f"CI=true and the browser tests cannot run: {reason}")
        pytest.skip(reason)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=machine.find_chromium(), args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def modules_page(browser):
    """A page of the served explorer/ with model.js, checkpoint.js and lessons.js imported as window.model,
    window.ckpt and window.lessons."""
    with served(Path(__file__).resolve().parent.parent / "explorer") as url:
        page = browser.new_page()
        page.route(f"{url}/modules.html", lambda route: route.fulfill(status=200, content_type="text/html",
                                                                      body="<!doctype html><title>modules</title>"))
        page.goto(f"{url}/modules.html")
        page.evaluate("async () => { window.model = await import('./model.js');"
                      " window.ckpt = await import('./checkpoint.js');"
                      " window.lessons = await import('./lessons.js'); }")
        yield page
        page.close()


@pytest.fixture
def pages(browser):
    """pages(url, width, init_script, failing): open_page's page at url, closed after the test. After
    it, no page the test opened may have logged a console or page error, but one that contains the phrase failing,
    given for a page opened to fail (a worker that throws, a page without its data)."""
    opened = []

    def opener(url, width=1280, init_script=None, failing=None):
        page, errors = open_page(browser, url, width, init_script)
        opened.append((page, errors, failing))
        return page

    yield opener
    for page, _, _ in opened:
        page.close()
    unexpected = [[e for e in errors if not (failing and failing in e)] for _, errors, failing in opened]
    assert unexpected == [[]] * len(opened)


@pytest.fixture(scope="module")
def shared_page(browser, page_url):
    """One page at the module's page_url (a fixture of the module), loaded once for all its readers, and the list
    its errors go to."""
    page, errors = open_page(browser, page_url)
    yield page, errors
    page.close()


@pytest.fixture
def reader(shared_page):
    """The module's shared page, for a test that reads it and runs its functions but changes no panel's model or
    text. After the test, the page may have logged no console or page error."""
    page, errors = shared_page
    yield page
    assert errors == []


@pytest.fixture(scope="session")
def base_checkpoints(tmp_path_factory):
    """A folder with notes.txt and the three small checkpoints of checkpoint_edits.RUNS, written once for the tests
    that damage, load or refuse them: (folder, {name: the checkpoint's bytes})."""
    folder = tmp_path_factory.mktemp("bases")
    return folder, write_bases(folder)


@pytest.fixture
def notes(tmp_path, monkeypatch):
    """tmp_path, the folder the test runs in, with notes.txt in it (run_helpers.own_text)."""
    (tmp_path / "notes.txt").write_text(own_text(), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path
